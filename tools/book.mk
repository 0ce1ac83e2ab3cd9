# The book (included by the Makefile). See book/README.md.
#> make book [STUDENT=1] [BOOK_COVERAGE=0]     the book as a website in build/book/ (start at index.html):
#>                                             every page with its code pulled in, a sidebar in the order of
#>                                             book/README.md's table, each chapter's exercises, each stage's diff,
#>                                             figures measured now (from build/bench/bench.json when make
#>                                             bench wrote it) and drawn by gnuplot; pandoc, gnuplot and
#>                                             chromium (the live page's screenshots) and puppeteer-core are
#>                                             installed (Debian as root, npm) if missing; the tables of
#>                                             exercises, code lines, coverage and a sample grade are computed
#>                                             (BOOK_COVERAGE=0 skips the coverage runs); STUDENT=1: the
#>                                             students' edition in build/book-student/, exercises as stubs in
#>                                             the text and every diff; fails if a page shows an answer
#> make book-check                             loads every page of build/book in headless Chromium (installed
#>                                             from Debian, puppeteer-core from npm): fails on a missing image,
#>                                             a broken internal link, an empty section, a console error or a
#>                                             figure without data; screenshots in build/book/shots/
#> make book-links                             refresh the book's include links (file and lines) after
#>                                             the code moved; make test fails while one is stale
#> make book-coverage                          only the coverage runs whose figures the book shows
#> make book-figures                           only the figures: measured on the default model (or read from
#>                                             make bench's JSON and make bench-ab's), drawn in build/book/figures/
#> make book-setup                             installs pandoc and gnuplot (as root)

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
$(BUILD)/tools/book-figures: tools/book/figures.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/bookpp $(BUILD)/tools/book-figures

.PHONY: book book-setup book-links book-coverage book-figures book-check
book-setup:
	@command -v pandoc >/dev/null && command -v gnuplot >/dev/null || tools/apt-install.sh book pandoc gnuplot-nox

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

# The figures: measured on the default model (and read from make bench's JSON
# when there is one, and make bench-ab's), drawn by gnuplot into $(BOOK_OUT)/figures/.
# III.7's A/B measured here runs the last chapter's chat-server (in ALL_PROGRAMS)
# under tools/loadgen.
BENCH_JSON    ?= $(BUILD)/bench/bench.json
BENCH_AB_JSON ?= $(BUILD)/bench/ab.json
book-figures: $(BUILD)/tools/book-figures book-setup $(ALL_PROGRAMS) $(BUILD)/tools/loadgen $(BUILD)/tools/kv-bench $(DEFAULT_MODEL)
	@$(BUILD)/tools/book-figures --out $(BOOK_OUT)/figures --build $(BUILD) --model $(DEFAULT_MODEL) \
	  --chapters "$(CHAPTERS)" --bench $(BENCH_JSON) --ab $(BENCH_AB_JSON)

# The first build says what it does and how long it takes (nothing is shown
# for minutes otherwise).
ifneq ($(filter book book-check,$(MAKECMDGOALS)),)
ifeq ($(wildcard $(BOOK_OUT)/index.html),)
$(info book: a first build of $(BOOK_OUT): installs pandoc and gnuplot if missing, builds the programs,)
$(info book: measures the figures on the default model and runs the coverage of every chapter with)
$(info book: exercises (BOOK_COVERAGE=0 skips it): about 10 minutes on 2 cores; later builds reuse it all)
endif
endif

# The sample grade (tools/book/grade-sample.sh) needs the grader, common/ and the test models.
book: $(BUILD)/tools/bookpp book-setup book-figures $(if $(filter 1,$(BOOK_COVERAGE)),book-coverage) \
		$(BUILD)/tools/exercises $(BUILD)/tools/chapter-diff $(COMMON_LIB) $(TEST_MODELS)
	@BUILD=$(BUILD) OUT=$(BOOK_OUT) CHAPTERS="$(CHAPTERS)" STUDENT=$(filter 1,$(STUDENT)) tools/book/site.sh
	@echo "book: $(BOOK_OUT)/index.html"

# Every include of the book resolves and its link is current: checked by make test.
$(BUILD)/tests/book: tests/book/test_book.c tests/harness.c $(BUILD)/tools/bookpp $(BUILD)/tools/book-figures \
		| $(BUILD)/tools/exercises $(BUILD)/tools/chapter-diff
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ tests/book/test_book.c tests/harness.c
EXTRA_TESTS += $(BUILD)/tests/book

# The browser check: headless Chromium from Debian, driven by puppeteer-core
# from npm (installed in build/node, beside the server tests' openai client).
PUPPETEER = $(BUILD)/node/node_modules/puppeteer-core/package.json
$(PUPPETEER):
	@command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 || tools/apt-install.sh book-check npm
	@mkdir -p $(BUILD)/node
	npm install --prefix $(BUILD)/node --no-audit --no-fund --loglevel=error puppeteer-core@24
book-check: book $(PUPPETEER)
	@command -v chromium >/dev/null || tools/apt-install.sh book-check chromium
	node tools/book/check.mjs $(BOOK_OUT) $$(command -v chromium)

# Screenshots of chat-server's live page (GET /) for the III.4 and III.5-6
# pages: the same headless Chromium, three requests sharing a system prompt
# paused mid-run (tools/book/page-shots.mjs); each page's <!-- @figure page-III.x -->.
#> make book-page-shots                        only the screenshots of chat-server's live page for the book
#>                                             (part of make book): headless Chromium, three requests at once
.PHONY: book-page-shots
book-page-shots: $(PUPPETEER) $(BUILD)/III.4/chat-server $(BUILD)/III.7/chat-server $(DEFAULT_MODEL)
	@command -v chromium >/dev/null || tools/apt-install.sh book chromium
	@node tools/book/page-shots.mjs $$(command -v chromium) $(BUILD) $(DEFAULT_MODEL) $(BOOK_OUT)/figures
book: book-page-shots
