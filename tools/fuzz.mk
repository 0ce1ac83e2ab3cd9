# Fuzzing (included by the Makefile): libFuzzer targets for the parsers, in
# tests/fuzz/ (see tests/fuzz/fuzz.h and the README section "Reliability").
#> make fuzz [FUZZ_SECONDS=60]                 each fuzz target (tests/fuzz/) for that long under
#>                                             libFuzzer + ASan + UBSan, from its seeds; new inputs in
#>                                             build/fuzz/corpus/, crashes in build/fuzz/crashes/
#>   FUZZ_TARGETS="gguf json"                  only these targets (default: every one)
#> make fuzz-build                             only build the fuzz targets (build/fuzz/fuzz-NAME)
#> make fuzz-setup                             installs clang (as root) if it is missing
#> make fuzz-seeds                             remake the seed corpora with mkmodel and model-generate
#
# Targets: every tests/fuzz/fuzz_NAME.c (gguf, tokenizer, json, chat, http). A
# new one needs only its file and a seed directory tests/fuzz/corpus/NAME: the
# rules below and the replay test pick it up.
#
# `make test` replays every seed and every input in tests/fuzz/regress/NAME
# through each target, built with the normal compiler: build/tests/fuzz-NAME.
# When the fuzzer finds something: copy build/fuzz/crashes/NAME/crash-... to
# tests/fuzz/regress/NAME/<what-was-wrong> (the name says the cause), fix the
# code, and the replay test keeps it fixed (under SANITIZE=1 for leaks).

FUZZ_ALL      := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS  ?= $(FUZZ_ALL)
FUZZ_SECONDS  ?= 60
FUZZ_DIR      := build/fuzz
FUZZ_CC       ?= clang
FUZZ_CFLAGS   := -O1 -g -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -MMD -MP \
                 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_HDR      := tests/fuzz/fuzz.h

# The replay tests: one binary per target, in make test.
$(BUILD)/tests/fuzz-%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(FUZZ_HDR) tests/harness.c $(BUILD)/obj/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_TARGET=$* -Itests -Itests/fuzz $(COMMON_INC) -o $@ $(filter %.c %.a,$^) $(LDLIBS)
EXTRA_TESTS += $(foreach t,$(FUZZ_ALL),$(BUILD)/tests/fuzz-$(t))

.PHONY: fuzz fuzz-setup fuzz-build fuzz-seeds
# A $(FUZZ_CC) that links libFuzzer is enough (any clang); else Debian's clang.
fuzz-setup:
	@echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
	  $(FUZZ_CC) -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null || \
	  tools/apt-install.sh fuzz clang libclang-rt-dev

# All of common/ built by clang with coverage instrumentation, in its own tree.
FUZZ_LIB_SRC := $(COMMON_SRC)
FUZZ_LIB     := $(FUZZ_DIR)/obj/libcommon.a

$(FUZZ_DIR)/obj/%.o: %.c | fuzz-setup
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(COMMON_INC) -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
	@rm -f $@
	ar rcs $@ $^

# Each with libFuzzer's main; libfuzzer_help.c makes --help answer like every program here.
$(FUZZ_DIR)/fuzz-%: tests/fuzz/fuzz_%.c tests/fuzz/libfuzzer_help.c $(FUZZ_HDR) $(FUZZ_LIB) | fuzz-setup
	$(FUZZ_CC) $(filter-out -MMD -MP,$(FUZZ_CFLAGS)) -fsanitize=fuzzer -DFUZZ_NAME='"$*"' \
	  -Itests/fuzz $(COMMON_INC) -o $@ $(filter %.c,$^) $(FUZZ_LIB) $(LDLIBS)

fuzz-build: $(foreach t,$(FUZZ_TARGETS),$(FUZZ_DIR)/fuzz-$(t))

# Each target for FUZZ_SECONDS; a summary line each; fails if any found something.
fuzz: fuzz-build
	@failed=; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/crashes/$$t $(FUZZ_DIR)/logs; \
	  log=$(FUZZ_DIR)/logs/$$t.log; \
	  if $(FUZZ_DIR)/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	       -artifact_prefix=$(FUZZ_DIR)/crashes/$$t/ $(FUZZ_DIR)/corpus/$$t tests/fuzz/corpus/$$t >$$log 2>&1; then \
	    echo "fuzz $$t: $$(grep -o 'Done [0-9]* runs in [0-9]* second(s)' $$log | tail -n 1), \
	corpus $$(ls $(FUZZ_DIR)/corpus/$$t | wc -l) inputs, $$(grep -o 'cov: [0-9]*' $$log | tail -n 1): nothing found"; \
	  else \
	    echo "fuzz $$t: FOUND A PROBLEM (log: $$log)"; grep -A30 -m1 'ERROR\|property failed\|SUMMARY' $$log | head -40; \
	    ls -1 $(FUZZ_DIR)/crashes/$$t/; failed="$$failed $$t"; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: problems in$$failed; replay one with build/fuzz/fuzz-NAME FILE" >&2; exit 1; fi

fuzz-seeds: $(BUILD)/tools/mkmodel $(BUILD)/II.2/model-generate
	tools/fuzz-seeds.sh $(BUILD)
-include $(wildcard $(FUZZ_DIR)/obj/common/*.d $(FUZZ_DIR)/obj/common/*/*.d)
