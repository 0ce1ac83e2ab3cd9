# The book (included by the Makefile).
#> make book                                   the book in build/book/ (*.md with the code pulled in, and
#>                                             HTML by pandoc, installed from Debian as root if missing)
#> make book-setup                             installs pandoc (as root)

BOOK_MD := $(sort $(wildcard book/*.md))

$(BUILD)/tools/bookpp: tools/book/bookpp.c tools/chapters/cfuncs.c tools/chapters/chapfs.c tools/chapters/cfuncs.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools/chapters -o $@ $(filter %.c,$^)
EXTRA_TOOLS += $(BUILD)/tools/bookpp

.PHONY: book book-setup
book-setup:
	@command -v pandoc >/dev/null || tools/apt-install.sh book pandoc

book: $(BUILD)/tools/bookpp book-setup
	@mkdir -p $(BUILD)/book
	@for f in $(BOOK_MD); do \
	  out=$(BUILD)/book/$$(basename $$f); \
	  $(BUILD)/tools/bookpp $$f > $$out || exit 1; \
	  pandoc --standalone --metadata title="$$(head -n1 $$f | sed 's/^# //')" \
	    -o $${out%.md}.html $$out || exit 1; \
	done
	@echo "book: $(BUILD)/book/*.html"

# Every @include of the book must resolve: checked by make test.
$(BUILD)/tests/book: tests/book/test_book.c tests/harness.c $(BUILD)/tools/bookpp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ tests/book/test_book.c tests/harness.c
EXTRA_TESTS += $(BUILD)/tests/book
