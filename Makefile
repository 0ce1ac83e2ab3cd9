# The one entry point. See README.md for the commands; `make help` lists them.

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

# The default model: committed under models/ when it exists, else made by mkmodel.
DEFAULT_MODEL := $(firstword $(wildcard models/default.gguf) $(BUILD)/models/default.gguf)
MODEL  ?= $(DEFAULT_MODEL)
PROMPT ?= Once upon a time
N      ?= 64
ARGS   ?=

# ---- common/ ---------------------------------------------------------------
COMMON_SRC := $(wildcard common/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/obj/%.o)
COMMON_LIB := $(BUILD)/obj/libcommon.a

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icommon -c $< -o $@

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
	$$(CC) $$(CFLAGS) -Ichapters/$(1) -Icommon -c $$< -o $$@

$(BUILD)/$(1)/%: $(BUILD)/obj/chapters/$(1)/%.o $$($(1)_LIB) $(COMMON_LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -o $$@ $$^ $$(LDLIBS)

$(1)_TEST_SRC := $$(wildcard tests/chapters/$(1)/*.c)
$(BUILD)/tests/chapter-$(1): $$($(1)_TEST_SRC) tests/harness.c $$(wildcard tests/ref/*.c) $$($(1)_LIB) $(COMMON_LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -Itests -Itests/ref -Ichapters/$(1) -Icommon -o $$@ $$^ $$(LDLIBS)

build-$(1): $$($(1)_PROGRAMS)
endef
$(foreach c,$(CHAPTERS),$(eval $(call CHAPTER_RULES,$(c))))

ALL_PROGRAMS := $(foreach c,$(CHAPTERS),$($(c)_PROGRAMS))

# ---- tools -----------------------------------------------------------------
$(BUILD)/tools/mkmodel: tools/mkmodel.c tools/gguf_writer.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools -Icommon -o $@ $^ $(LDLIBS)

$(BUILD)/tools/%: tools/%.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icommon -o $@ $^ $(LDLIBS)

# Test models: small, deterministic, made on demand.
include $(sort $(wildcard tools/*.mk))

# ---- tests -----------------------------------------------------------------
COMMON_TEST_SRC := $(wildcard tests/common/*.c)
$(BUILD)/tests/common: $(COMMON_TEST_SRC) tests/harness.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Icommon -o $@ $^ $(LDLIBS)

CROSS_TEST_SRC := $(wildcard tests/cross/*.c)
$(BUILD)/tests/cross: $(CROSS_TEST_SRC) tests/harness.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Icommon -o $@ $^ $(LDLIBS)

CHAPTER_TESTS := $(foreach c,$(CHAPTERS),$(if $($(c)_TEST_SRC),$(BUILD)/tests/chapter-$(c)))
# tools/*.mk may add test binaries to EXTRA_TESTS.
ALL_TESTS = $(BUILD)/tests/common $(CHAPTER_TESTS) $(if $(CROSS_TEST_SRC),$(BUILD)/tests/cross) $(EXTRA_TESTS)

.PHONY: all test run build help clean bench memcheck check-chapter
all: $(ALL_PROGRAMS) $(BUILD)/tools/mkmodel

ifeq ($(origin chapter),command line)
default: build
else
default: all
endif

check-chapter:
	@if [ -z "$(filter $(chapter),$(CHAPTERS))" ]; then \
	  echo "error: unknown chapter '$(chapter)'; chapters: $(CHAPTERS)" >&2; exit 2; fi

ifeq ($(origin chapter),command line)
test: check-chapter $(BUILD)/tests/common $(filter %-$(chapter),$(CHAPTER_TESTS)) $(TEST_MODELS) $(ALL_PROGRAMS)
	@tools/run-tests.sh $(BUILD)/tests/common $(filter %-$(chapter),$(CHAPTER_TESTS))
else
test: $(ALL_TESTS) $(TEST_MODELS) $(ALL_PROGRAMS)
	@tools/run-tests.sh $(ALL_TESTS)
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
	@command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
	@set -e; for c in $(CHAPTERS); do \
	  for kv in "" $$($(BUILD)/$$c/model-generate --help | sed -n 's/.*modes://p' | sed 's/(default)//'); do \
	    echo "memcheck $$c $${kv:+--kv $$kv}"; \
	    $(VALGRIND) $(BUILD)/$$c/model-generate $${kv:+--kv $$kv} --quiet --backend scalar $(BUILD)/models/tiny-f32.gguf "Hello, world" 6 >/dev/null; \
	    $(VALGRIND) $(BUILD)/$$c/model-generate $${kv:+--kv $$kv} --quiet --threads 2 $(BUILD)/models/tiny-q8_0.gguf "Hello, world" 6 >/dev/null; \
	  done; done
	$(VALGRIND) $(BUILD)/tests/common gguf tokenizer json unicode chat cli qwen3 > /dev/null
	@echo "memcheck: no errors"

help:
	@echo "make chapter=II.2 run [MODEL=f.gguf PROMPT=... N=64 ARGS=...]   run a chapter's model-generate"
	@echo "make test | make chapter=II.2 test                              run the tests"
	@echo "make diff from=II.1 to=II.2 [FORMAT=html]                       what a chapter changed"
	@echo "make manifest-check                                             chapters against their MANIFESTs"
	@echo "make book                                                       render the book to build/book/"
	@echo "make memcheck                                                   short runs under valgrind"
	@echo "make chapter=II.2 exercise | grade [EXERCISE=id]                stubbed copy in exercises/II.2, its score"
	@echo "make chapter=II.2 coverage                                      gcovr report in build/coverage/II.2"
	@echo "make bench                                                      benchmarks (never part of make test)"
	@echo "chapters: $(CHAPTERS)"

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
