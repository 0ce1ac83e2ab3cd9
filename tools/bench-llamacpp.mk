# The yardstick (never part of make test): llama.cpp's llama-bench and
# llama-batched-bench, built once under build/llamacpp from the llama.cpp source
# that the npm package node-llama-cpp ships (tools/bench/llamacpp-build.sh), run
# on the same Qwen3-0.6B-shaped models as make bench (bench.mk makes them),
# interleaved with this engine: tools/bench/llamacpp.c prints the tables and
# writes build/bench/llamacpp.md and llamacpp.json.
# Read before bench.mk: only the Makefile's and models.mk's variables here.
#> make bench-llamacpp                         this engine and llama.cpp side by side on the bench models:
#>                                             warm prefill (pp128; and our cold one), decode (tg64) and
#>                                             batched decode (B = 1 2 4 8), ours, theirs and the ratio;
#>                                             builds llama.cpp first (npm pack node-llama-cpp, cmake,
#>                                             minutes); knobs:
#>   BENCH_LLAMACPP_TYPES=...                  weight types (default: f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m
#>                                             q6_k iq4_xs, the types people download; 7.5 GB of models)
#>   BENCH_LLAMACPP_ROUNDS=N                   rounds, ours then theirs per type; the tables give the
#>                                             median round and the spread (default: 3)
#>   BENCH_LLAMACPP_REPS=N                     pp and tg runs per round, after a warm-up (default: 2)
#>   BENCH_LLAMACPP_THREADS=N                  threads on both sides (default: 2)
#>   BENCH_LLAMACPP_BATCHES="1 2 4 8"          batched-decode batch sizes ("": none)
#> make llamacpp-build                         only build llama.cpp's two benchmarks, in build/llamacpp
BENCH_LLAMACPP_TYPES   ?= f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m q6_k iq4_xs
BENCH_LLAMACPP_ROUNDS  ?= 3
BENCH_LLAMACPP_REPS    ?= 2
BENCH_LLAMACPP_THREADS ?= 2
BENCH_LLAMACPP_BATCHES ?= 1 2 4 8
LLAMACPP_PACKAGE := node-llama-cpp@3.22.1
LLAMACPP_DIR     := $(BUILD)/llamacpp

# Ours: the last chapter's engine (paged cache) timed as llama-bench times llama.cpp, and its
# batched-bench.
PP_TG_CHAPTER := III.7
$(BUILD)/tools/pp-tg: tools/bench/pp_tg.c $($(PP_TG_CHAPTER)_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ichapters/$(PP_TG_CHAPTER) $(COMMON_INC) -o $@ $^ $(LDLIBS)
$(BUILD)/tools/bench-llamacpp: tools/bench/llamacpp.c tools/bench/command.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools/bench $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/pp-tg $(BUILD)/tools/bench-llamacpp
LLAMACPP_BATCHED := $(BUILD)/$(lastword $(foreach c,$(CHAPTERS),$(if $(wildcard chapters/$(c)/batched-bench.c),$(c))))/batched-bench

# Always run: the script skips what is there, and cmake rebuilds nothing when
# nothing changed.
.PHONY: llamacpp-build bench-llamacpp
llamacpp-build:
	@command -v npm >/dev/null 2>&1 || tools/apt-install.sh bench-llamacpp npm
	@command -v git >/dev/null 2>&1 || tools/apt-install.sh bench-llamacpp git
	@command -v cmake >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 || tools/apt-install.sh bench-llamacpp cmake g++
	tools/bench/llamacpp-build.sh $(LLAMACPP_PACKAGE) $(LLAMACPP_DIR)

# The models' rule (bench.mk) checks their disk space for BENCH_TYPES: here, these types.
bench-llamacpp: BENCH_TYPES = $(BENCH_LLAMACPP_TYPES)
bench-llamacpp: llamacpp-build $(BUILD)/tools/pp-tg $(BUILD)/tools/bench-llamacpp $(BUILD)/tools/membw \
	  $(LLAMACPP_BATCHED) $(foreach t,$(BENCH_LLAMACPP_TYPES),$(BUILD)/bench/models/qwen3-0.6b-$(t).gguf)
	@mkdir -p $(BUILD)/bench
	$(BUILD)/tools/bench-llamacpp --llamacpp $(LLAMACPP_DIR)/cmake/bin --source "$$(cat $(LLAMACPP_DIR)/source.txt)" \
	  --pp-tg $(BUILD)/tools/pp-tg --batched $(LLAMACPP_BATCHED) --membw $(BUILD)/tools/membw \
	  --models $(BUILD)/bench/models --out $(BUILD)/bench --types "$(BENCH_LLAMACPP_TYPES)" \
	  --rounds $(BENCH_LLAMACPP_ROUNDS) --reps $(BENCH_LLAMACPP_REPS) --threads $(BENCH_LLAMACPP_THREADS) \
	  --batches "$(BENCH_LLAMACPP_BATCHES)"
