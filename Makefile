# The one entry point. See README.md for the commands; `make help` lists them:
# the lines starting "#>" here and in tools/*.mk, where each tool documents its own.
#> make | make all                             build every chapter and tool
#> make chapter=II.2 [build]                   build that chapter's programs
#> make chapter=II.2 run                       that chapter's model-generate on the default model
#>   [MODEL=f.gguf PROMPT=... N=64 ARGS=...]   any model, prompt, length and flags
#> make test | make chapter=II.2 test          the tests of common/ and every chapter (or one chapter),
#>                                             ending with "N passed, N failed, N skipped"
#>   SUITES="common server"                    only those test binaries (build/tests/NAME; with chapter=:
#>                                             common, chapter-NAME)
#> make memcheck                               short runs of every chapter under valgrind (installed from
#>                                             Debian as root if missing)
#> make clean                                  removes build/
#> make help                                   this list

CC      ?= cc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -MMD -MP
LDLIBS  += -lm -lpthread
BUILD   ?= build

# make test SANITIZE=1: AddressSanitizer + UBSan; SANITIZE=thread: ThreadSanitizer.
# Each builds into its own tree so its objects never mix with the normal ones
# (the run-time options are in tools/sanitize.mk).
SANITIZE           ?=
SAN_KIND           := $(if $(filter 1 address,$(SANITIZE)),address,$(SANITIZE))
SAN_CFLAGS_address := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_CFLAGS_thread  := -fsanitize=thread -fno-omit-frame-pointer
ifneq ($(SANITIZE),)
$(if $(SAN_CFLAGS_$(SAN_KIND)),,$(error SANITIZE=$(SANITIZE): use SANITIZE=1 (address + undefined) or SANITIZE=thread))
BUILD  := build/san-$(SAN_KIND)
CFLAGS += $(SAN_CFLAGS_$(SAN_KIND))
endif

CHAPTERS := $(sort $(notdir $(wildcard chapters/*)))
chapter  ?= II.2

# `make` builds everything; `make chapter=II.1` builds that chapter's programs.
.DEFAULT_GOAL := default

# The default model: the trained one committed under models/, else a synthetic one made by mkmodel.
DEFAULT_MODEL := $(firstword $(wildcard models/default.gguf) $(BUILD)/models/medium.gguf)
MODEL  ?= $(DEFAULT_MODEL)
PROMPT ?= Once upon a time
N      ?= 64
ARGS   ?=

# ---- common/ ---------------------------------------------------------------
# One folder per layer, lowest first; a file includes only its own layer and
# those below it (common/README.md; tests/tools/test_layers.c checks it).
# Every folder is on the include path, so includes name the header alone.
COMMON_LAYERS := model compute text run serve
COMMON_INC    := -Icommon $(addprefix -Icommon/,$(COMMON_LAYERS))
COMMON_SRC := $(wildcard common/*.c $(addsuffix /*.c,$(addprefix common/,$(COMMON_LAYERS))))
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
COMMON_LIB := $(BUILD)/obj/libcommon.a

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(COMMON_INC) -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ---- chapters --------------------------------------------------------------
# In a chapter directory, a file named like a program (model-generate.c) holds
# that program's main; every other .c file is the chapter's engine.
define CHAPTER_RULES
$(1)_SRC      := $$(wildcard chapters/$(1)/*.c)
$(1)_MAINS    := $$(foreach f,$$($(1)_SRC),$$(if $$(findstring -,$$(notdir $$(f))),$$(f)))
$(1)_LIBSRC   := $$(filter-out $$($(1)_MAINS),$$($(1)_SRC))
$(1)_LIBOBJ   := $$($(1)_LIBSRC:%.c=$(BUILD)/obj/%.o)
$(1)_PROGRAMS := $$(patsubst chapters/$(1)/%.c,$(BUILD)/$(1)/%,$$($(1)_MAINS))
$(1)_LIB      := $(BUILD)/obj/chapters/$(1)/libchapter.a

$$($(1)_LIB): $$($(1)_LIBOBJ)
	@rm -f $$@
	ar rcs $$@ $$^

$(BUILD)/obj/chapters/$(1)/%.o: chapters/$(1)/%.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -Ichapters/$(1) $(COMMON_INC) -c $$< -o $$@

# A static pattern rule: the programs' objects are named, so make keeps them
# (a plain pattern chain would delete them as intermediates, and relink next time).
$$($(1)_PROGRAMS): $(BUILD)/$(1)/%: $(BUILD)/obj/chapters/$(1)/%.o $$($(1)_LIB) $(COMMON_LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -o $$@ $$^ $$(LDLIBS)

$(1)_TEST_SRC := $$(wildcard tests/chapters/$(1)/*.c)
$(BUILD)/tests/chapter-$(1): $$($(1)_TEST_SRC) tests/harness.c $$(wildcard tests/ref/*.c) $$($(1)_LIB) $(COMMON_LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -Itests -Itests/ref -Ichapters/$(1) $(COMMON_INC) -o $$@ $$^ $$(LDLIBS)

build-$(1): $$($(1)_PROGRAMS)
endef
$(foreach c,$(CHAPTERS),$(eval $(call CHAPTER_RULES,$(c))))

ALL_PROGRAMS := $(foreach c,$(CHAPTERS),$($(c)_PROGRAMS))

# ---- tools -----------------------------------------------------------------
$(BUILD)/tools/mkmodel: tools/mkmodel.c tools/gguf_writer.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools $(COMMON_INC) -o $@ $^ $(LDLIBS)

$(BUILD)/tools/%: tools/%.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(COMMON_INC) -o $@ $^ $(LDLIBS)

# tools/*.mk: one file per tool. Make expands a rule's prerequisites when it
# reads the rule, so a variable a rule depends on must be defined before it:
# models.mk (the models every test, grade, coverage and bench run needs) comes
# first, whatever the names of the others. `make test` checks that no file
# reads a variable a later one defines (tests/tools/test_make.c).
include tools/models.mk
include $(filter-out tools/models.mk,$(sort $(wildcard tools/*.mk)))

# ---- tests -----------------------------------------------------------------
COMMON_TEST_SRC := $(wildcard tests/common/*.c)
$(BUILD)/tests/common: $(COMMON_TEST_SRC) tests/harness.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(COMMON_INC) -o $@ $^ $(LDLIBS)

CROSS_TEST_SRC := $(wildcard tests/cross/*.c)
$(BUILD)/tests/cross: $(CROSS_TEST_SRC) tests/harness.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(COMMON_INC) -o $@ $^ $(LDLIBS)

CHAPTER_TESTS := $(foreach c,$(CHAPTERS),$(if $($(c)_TEST_SRC),$(BUILD)/tests/chapter-$(c)))
# tools/*.mk add their test binaries to EXTRA_TESTS and their programs to EXTRA_TOOLS.
ALL_TESTS = $(BUILD)/tests/common $(CHAPTER_TESTS) $(if $(CROSS_TEST_SRC),$(BUILD)/tests/cross) $(EXTRA_TESTS)
ALL_TOOLS = $(MKMODEL) $(EXTRA_TOOLS)

.PHONY: all test run build help clean bench memcheck check-chapter
all: $(ALL_PROGRAMS) $(ALL_TOOLS)

ifeq ($(origin chapter),command line)
default: build
else
default: all
endif

check-chapter:
	@if [ -z "$(filter $(chapter),$(CHAPTERS))" ]; then \
	  echo "error: unknown chapter '$(chapter)'; chapters: $(CHAPTERS)" >&2; exit 2; fi

# SUITES=: a part of the suite by the binaries' names (what a ThreadSanitizer run needs, say);
# with chapter=, a part of that chapter's (common and chapter-NAME).
SUITES       ?=
ifeq ($(origin chapter),command line)
RUN_TESTS     = $(BUILD)/tests/common $(filter %-$(chapter),$(CHAPTER_TESTS))
else
RUN_TESTS     = $(ALL_TESTS)
endif
SUITE_TESTS   = $(if $(SUITES),$(filter $(addprefix %/,$(SUITES)),$(RUN_TESTS)),$(RUN_TESTS))
ifneq ($(filter test,$(MAKECMDGOALS)),) # SUITES is make test's: other goals ignore it
$(foreach t,$(SUITES),$(if $(filter %/$(t),$(RUN_TESTS)),,$(error SUITES: no test suite '$(t)'$(if $(filter command line,$(origin chapter)), in chapter=$(chapter)); suites: $(notdir $(RUN_TESTS)))))
endif
ifeq ($(origin chapter),command line)
test: check-chapter $(SUITE_TESTS) $(TEST_MODELS) $(ALL_PROGRAMS)
	@tools/run-tests.sh $(SUITE_TESTS)
else
test: $(SUITE_TESTS) $(TEST_MODELS) $(ALL_PROGRAMS) $(ALL_TOOLS)
	@tools/run-tests.sh $(SUITE_TESTS)
endif

build: check-chapter
	@$(MAKE) --no-print-directory build-$(chapter)

run: check-chapter
	@$(MAKE) -s --no-print-directory build-$(chapter) $(DEFAULT_MODEL)
	$(BUILD)/$(chapter)/model-generate $(ARGS) $(MODEL) "$(PROMPT)" $(N)

# A short run of every chapter (each cache mode) and of the parsers' tests
# under valgrind: no invalid access, no leak.
VALGRIND := valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite
memcheck: $(ALL_PROGRAMS) $(BUILD)/tests/common $(TEST_MODELS)
	@command -v valgrind >/dev/null || tools/apt-install.sh memcheck valgrind
	@set -e; for c in $(CHAPTERS); do \
	  for kv in "" $$($(BUILD)/$$c/model-generate --help | sed -n 's/.*modes://p' | sed 's/(default)//'); do \
	    echo "memcheck $$c $${kv:+--kv $$kv}"; \
	    $(VALGRIND) $(BUILD)/$$c/model-generate $${kv:+--kv $$kv} --quiet --backend scalar $(BUILD)/models/tiny-f32.gguf "Hello, world" 6 >/dev/null; \
	    $(VALGRIND) $(BUILD)/$$c/model-generate $${kv:+--kv $$kv} --quiet --threads 2 $(BUILD)/models/tiny-q8_0.gguf "Hello, world" 6 >/dev/null; \
	  done; done
	$(VALGRIND) $(BUILD)/$(lastword $(CHAPTERS))/model-generate --check-finite --quiet --threads 2 \
	  $(BUILD)/models/tiny-f32.gguf "Hello, world" 4 >/dev/null
	$(VALGRIND) $(BUILD)/tests/common gguf tokenizer json unicode chat cli qwen3 > /dev/null
	@echo "memcheck: no errors"

help:
	@sed -n 's/^#> //p' Makefile tools/models.mk $(filter-out tools/models.mk,$(sort $(wildcard tools/*.mk)))
	@echo "chapters: $(CHAPTERS)"

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
