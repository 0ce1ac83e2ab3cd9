# The book (included by the Makefile). See book/README.md.
#> make book [STUDENT=1] [BOOK_COVERAGE=0]     the book in build/book/ (README as index.html, each chapter as
#>                                             .md with its code pulled in and as HTML by pandoc, installed
#>                                             from Debian as root if missing); its tables of exercises,
#>                                             code lines, coverage and a sample grade are computed now
#>                                             (BOOK_COVERAGE=0 skips the coverage runs); STUDENT=1: the
#>                                             students' edition in build/book-student/, exercises as stubs
#> make book-links                             refresh the book's include links (file and lines) after
#>                                             the code moved; make test fails while one is stale
#> make book-coverage                          only the coverage runs whose figures the book shows
#> make book-setup                             installs pandoc (as root)

STUDENT       ?=
BOOK_COVERAGE ?= 1
BOOK_MD       := $(sort $(wildcard book/*.md))
BOOK_OUT      := $(BUILD)/$(if $(filter 1,$(STUDENT)),book-student,book)
BOOKPP_SRC    := tools/book/bookpp.c tools/chapters/cfuncs.c tools/chapters/chapfs.c \
	tools/exercises/markers.c tools/exercises/stub.c
# Chapters whose coverage the book reports: those with exercises.
BOOK_CHAPTERS  = $(foreach c,$(CHAPTERS),$(if $(shell grep -l '^/\* EXERCISE ' chapters/$(c)/*.c 2>/dev/null),$(c)))

$(BUILD)/tools/bookpp: $(BOOKPP_SRC) $(wildcard tools/chapters/*.h tools/exercises/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools/chapters -Itools/exercises -o $@ $(filter %.c,$^)
EXTRA_TOOLS += $(BUILD)/tools/bookpp

.PHONY: book book-setup book-links book-coverage
book-setup:
	@command -v pandoc >/dev/null || tools/apt-install.sh book pandoc

book-links: $(BUILD)/tools/bookpp
	@$(BUILD)/tools/bookpp --update README.md $(BOOK_MD)

# What `make chapter=X coverage` prints, for the book's coverage table. The test
# models (and mkmodel, and common/) are made here first, so that the sub-makes never
# build them while this make does (with -j they would race).
book-coverage: $(TEST_MODELS)
	@mkdir -p $(BOOK_OUT)
	@for c in $(BOOK_CHAPTERS); do echo "book: coverage of chapter $$c"; \
	  $(MAKE) -s --no-print-directory chapter=$$c coverage >$(BOOK_OUT)/coverage-$$c.txt 2>&1 || \
	  { tail -n 20 $(BOOK_OUT)/coverage-$$c.txt; exit 1; }; done

# The sample grade (tools/book/grade-sample.sh) needs the grader, common/ and the test models.
book: $(BUILD)/tools/bookpp book-setup $(if $(filter 1,$(BOOK_COVERAGE)),book-coverage) \
		$(BUILD)/tools/exercises $(COMMON_LIB) $(TEST_MODELS)
	@mkdir -p $(BOOK_OUT)
	@to_root=$$(realpath --relative-to=$(BOOK_OUT) .); \
	for f in README.md $(BOOK_MD); do \
	  name=$$(basename $$f .md); [ $$f = README.md ] && name=index; \
	  BUILD=$(BUILD) $(BUILD)/tools/bookpp $(if $(filter 1,$(STUDENT)),--student) --html $$to_root \
	    --data $(BOOK_OUT) $$f > $(BOOK_OUT)/$$name.md || exit 1; \
	  pandoc --standalone --metadata title="$$(head -n1 $$f | sed 's/^# //')" \
	    -o $(BOOK_OUT)/$$name.html $(BOOK_OUT)/$$name.md || exit 1; \
	done
	@echo "book: $(BOOK_OUT)/index.html"

# Every include of the book resolves and its link is current: checked by make test.
$(BUILD)/tests/book: tests/book/test_book.c tests/harness.c $(BUILD)/tools/bookpp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ tests/book/test_book.c tests/harness.c
EXTRA_TESTS += $(BUILD)/tests/book
