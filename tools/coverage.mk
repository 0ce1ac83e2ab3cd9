# Coverage of a chapter and common/ by the tests (included by the Makefile).
# See book/instructors.md.
#
#> make chapter=II.2 coverage                  gcovr table for the chapter and common/ (a --coverage build
#>                                             in build/coverage/II.2/, every --kv mode), and its index.html
#> make coverage-setup                         installs gcovr (as root) if it is missing
#
# The coverage build is the normal build (the same Makefile rules) with
# BUILD=build/coverage/<chapter> and coverage flags, so its objects never mix
# with the normal ones; each chapter gets its own tree because common/'s
# counters depend on which chapter drove them.

COVERAGE_DIR    := $(BUILD)/coverage/$(chapter)
COVERAGE_CFLAGS := -O0 -g --coverage -fprofile-update=atomic -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -MMD -MP
COVERAGE_TESTS  := $(COVERAGE_DIR)/tests/common $(COVERAGE_DIR)/tests/chapter-$(chapter)
COVERAGE_PROG   := $(COVERAGE_DIR)/$(chapter)/model-generate
COVERAGE_MODEL  := $(BUILD)/models/tiny-f32.gguf
GCOVR           ?= gcovr
# gcovr filters are regular expressions on paths relative to the root. Only
# the engine's objects are read: the tests' own objects would count again the
# inline functions of headers they include.
COVERAGE_FILTER := --filter 'chapters/$(subst .,\.,$(chapter))/' --filter 'common/'
COVERAGE_GCOVR  := --root . --object-directory $(COVERAGE_DIR) $(COVERAGE_DIR)/obj

.PHONY: coverage coverage-setup
coverage-setup:
	@if command -v $(GCOVR) >/dev/null 2>&1; then echo "gcovr: $$($(GCOVR) --version | head -n 1)"; \
	else tools/apt-install.sh coverage gcovr; fi

coverage: check-chapter $(TEST_MODELS)
	@command -v $(GCOVR) >/dev/null 2>&1 || $(MAKE) --no-print-directory coverage-setup
	@# Objects built with other flags would not be rebuilt by make: start over.
	@if [ "$$(cat $(COVERAGE_DIR)/flags 2>/dev/null)" != "$(CC) $(COVERAGE_CFLAGS)" ]; then \
	  rm -rf $(COVERAGE_DIR); mkdir -p $(COVERAGE_DIR); echo "$(CC) $(COVERAGE_CFLAGS)" >$(COVERAGE_DIR)/flags; fi
	@$(MAKE) --no-print-directory BUILD=$(COVERAGE_DIR) CFLAGS='$(COVERAGE_CFLAGS)' $(COVERAGE_TESTS) $(COVERAGE_PROG)
	@find $(COVERAGE_DIR) -name '*.gcda' -delete
	@echo "== tests (coverage build)"
	@TEST_MODELS=$(BUILD)/models BUILD_DIR=$(COVERAGE_DIR) tools/run-tests.sh $(COVERAGE_TESTS) | tail -n 1
	@echo "== model-generate on $(COVERAGE_MODEL), then --help and a bad flag"
	@$(COVERAGE_PROG) $(COVERAGE_MODEL) "Once upon a time" 8 >/dev/null
	@$(COVERAGE_PROG) --json $(COVERAGE_MODEL) "Once upon a time" 4 >/dev/null
	@if $(COVERAGE_PROG) --help | grep -q -- --kv; then \
	  for kind in $$($(COVERAGE_PROG) --help | sed -n 's/.*modes: *//p' | sed 's/([^)]*)//g'); do \
	    $(COVERAGE_PROG) --kv $$kind $(COVERAGE_MODEL) "Once upon a time" 8 >/dev/null || exit 1; done; fi
	@if $(COVERAGE_PROG) --help | grep -q -- --kv-trace; then \
	  $(COVERAGE_PROG) --kv-trace --kv-block-size 4 $(COVERAGE_MODEL) "Once upon a time" 8 >/dev/null 2>&1 || exit 1; fi
	@$(COVERAGE_PROG) --help >/dev/null
	@! $(COVERAGE_PROG) --no-such-flag $(COVERAGE_MODEL) 2>/dev/null
	@$(GCOVR) $(COVERAGE_GCOVR) $(COVERAGE_FILTER) --html-details $(COVERAGE_DIR)/index.html --txt - --print-summary
	@printf 'chapter %s alone: ' $(chapter); $(GCOVR) $(COVERAGE_GCOVR) \
	  --filter 'chapters/$(subst .,\.,$(chapter))/' --print-summary --txt $(COVERAGE_DIR)/chapter.txt | grep '^lines'
	@echo "HTML report: $(COVERAGE_DIR)/index.html"
