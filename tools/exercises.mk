# Exercises: stubbed copies of a chapter for students, and their grading
# (included by the Makefile). See book/instructors.md.
#
#> make chapter=II.2 exercise [FORCE=1]        exercises/II.2: the chapter with its exercises stubbed,
#>                                             EXERCISES.md, the task sheet, and book/, the chapter's
#>                                             text with each exercise shown as its stub and task (builds
#>                                             the programs and default model whose output that text shows)
#> make chapter=II.2 grade [EXERCISE=id]       grade exercises/II.2: OK/FAIL and points per exercise;
#>                                             exits non-zero unless every graded exercise passes
#>   [EXERCISE_DIR=dir] [GRADE_JSON=f.json]    grade another copy; write the points for autograders
#> make chapter=II.2 exercise-run              the copy's model-generate (MODEL, PROMPT, N, ARGS as for run)
#> make exercises-check                        every chapter's EXERCISE markers are well-formed and agree

EXERCISES_TOOL := $(BUILD)/tools/exercises
EXERCISES_LIB_SRC := tools/exercises/markers.c tools/exercises/stub.c tools/exercises/leaks.c tools/chapters/cfuncs.c \
	tools/chapters/chapfs.c
EXERCISES_HDR := $(wildcard tools/exercises/*.h) tools/chapters/cfuncs.h tools/chapters/chapfs.h
EXERCISE_DIR ?= exercises/$(chapter)
EXERCISE     ?=
GRADE_JSON   ?=
# The grader compiles students' code: no dependency files, and no noise about
# helpers a stub leaves unused.
EXERCISES_CFLAGS = $(filter-out -MMD -MP,$(CFLAGS))

$(EXERCISES_TOOL): tools/exercises/exercises.c $(EXERCISES_LIB_SRC) $(EXERCISES_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(EXERCISES_CFLAGS) -Itools/exercises -Itools/chapters -o $@ $(filter %.c,$^)
EXTRA_TOOLS += $(EXERCISES_TOOL)

.PHONY: exercise grade exercise-run exercises-check
# The students' edition of the chapter's text: the book pages that include its code.
# Their @output directives run the programs on the default model, so those are built first.
exercise: check-chapter $(EXERCISES_TOOL) $(BUILD)/tools/bookpp $(ALL_PROGRAMS) $(DEFAULT_MODEL)
	@$(if $(FORCE),rm -rf exercises/$(chapter))
	@$(EXERCISES_TOOL) stub $(chapter) exercises/$(chapter) || \
	  { echo "(make chapter=$(chapter) exercise FORCE=1 replaces it)" >&2; exit 1; }
	@mkdir -p exercises/$(chapter)/book
	@for f in $$(grep -l '^\[`[A-Za-z0-9_]*` in chapters/$(chapter)/' book/*.md); do \
	  $(BUILD)/tools/bookpp --student --md ../../.. $$f >exercises/$(chapter)/book/$$(basename $$f) || exit 1; \
	  echo "exercises/$(chapter)/book/$$(basename $$f): the chapter's text, exercises as stubs"; done

grade: check-chapter $(EXERCISES_TOOL) $(COMMON_LIB) $(TEST_MODELS)
	@BUILD='$(BUILD)' CC='$(CC)' CFLAGS='$(EXERCISES_CFLAGS)' LDLIBS='$(LDLIBS)' COMMON_LIB='$(COMMON_LIB)' \
	  EXERCISES_TOOL='$(EXERCISES_TOOL)' GRADE_JSON='$(GRADE_JSON)' tools/exercises/grade.sh $(chapter) $(EXERCISE_DIR) $(EXERCISE)

# The student's whole copy, as it is, built like a chapter's model-generate.
EXERCISE_RUN := $(BUILD)/exercises/$(chapter)/run/model-generate
exercise-run: check-chapter $(COMMON_LIB) $(DEFAULT_MODEL)
	@test -d $(EXERCISE_DIR) || { echo "no $(EXERCISE_DIR): make chapter=$(chapter) exercise" >&2; exit 2; }
	@mkdir -p $(dir $(EXERCISE_RUN))
	$(CC) $(EXERCISES_CFLAGS) -Wno-unused-function -I$(EXERCISE_DIR) $(COMMON_INC) -o $(EXERCISE_RUN) \
	  $(foreach f,$(wildcard $(EXERCISE_DIR)/*.c),$(if $(findstring -,$(notdir $(f))),,$(f))) \
	  $(EXERCISE_DIR)/model-generate.c $(COMMON_LIB) $(LDLIBS)
	$(EXERCISE_RUN) $(ARGS) $(MODEL) "$(PROMPT)" $(N)

exercises-check: $(EXERCISES_TOOL)
	@$(EXERCISES_TOOL) check && echo "exercise markers: ok"

# The tool's tests: they stub and grade the real chapters, so they need the
# tool, common/ and the test models (which `make test` makes) at run time.
EXERCISES_TEST_SRC := $(wildcard tests/exercises/*.c)
$(BUILD)/tests/exercises: $(EXERCISES_TEST_SRC) tests/harness.c $(EXERCISES_LIB_SRC) $(EXERCISES_HDR) \
		| $(EXERCISES_TOOL) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(EXERCISES_CFLAGS) -Itests -Itools/exercises -Itools/chapters -o $@ $(filter %.c,$^)
EXTRA_TESTS += $(BUILD)/tests/exercises
