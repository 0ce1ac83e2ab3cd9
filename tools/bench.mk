# The benchmark suite (never part of make test). Included by the Makefile.
# Builds every chapter, tools/membw and tools/bench, makes the Qwen3-0.6B-shaped
# models with mkmodel (cached under build/bench/models/), and runs tools/bench,
# which prints the table and writes build/bench/bench.md and bench.json.
#> make bench                                  benchmarks: bandwidth, prefill and decode speed of every
#>                                             chapter, type and backend; first says the disk space its
#>                                             models take and checks it; knobs (make variables):
#>   BENCH_TYPES=...                           weight types (default: q8_0 q4_0, 1.0 GB of models;
#>                                             all: f32 f16 bf16 q8_0 q4_0, 5.8 GB)
#>   BENCH_BACKENDS=...                        backends (default: simd parallel; scalar: minutes per type)
#>   BENCH_THREADS=N                           parallel threads (default: one per core)
#>   BENCH_TOKENS=N                            new tokens (default: 64; chapters without a KV cache: 4)
#>   BENCH_RUNS=N                              runs per figure, the best kept (default: 2)
#> make bench-space [BENCH_TYPES=...]          only say what disk space the bench models take, and check it

BENCH_TYPES    ?= q8_0 q4_0
override BENCH_TYPES := $(if $(filter all,$(BENCH_TYPES)),f32 f16 bf16 q8_0 q4_0,$(BENCH_TYPES))
BENCH_BACKENDS ?= simd parallel
BENCH_THREADS  ?= 0
BENCH_TOKENS   ?= 64
BENCH_RUNS     ?= 2
BENCH_DIR      := $(BUILD)/bench
BENCH_MODELS   := $(foreach t,$(BENCH_TYPES),$(BENCH_DIR)/models/qwen3-0.6b-$(t).gguf)

$(BUILD)/tools/bench: tools/bench/bench.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icommon -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/membw $(BUILD)/tools/bench

# Made once and kept (order-only: a rebuilt mkmodel does not remake GBs of models),
# after bench-space has said what they take and checked it is free.
$(BENCH_DIR)/models/qwen3-0.6b-%.gguf: | $(MKMODEL) bench-space
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset qwen3-0.6b --type $* -o $@

.PHONY: bench-space
bench-space: $(MKMODEL)
	@tools/bench/space.sh $(MKMODEL) $(BENCH_DIR)/models $(BENCH_TYPES)

# The models are precious: a failed or interrupted bench keeps them.
.PRECIOUS: $(BENCH_DIR)/models/qwen3-0.6b-%.gguf

bench: bench-space $(ALL_PROGRAMS) $(BUILD)/tools/membw $(BUILD)/tools/bench $(BENCH_MODELS)
	$(BUILD)/tools/bench --build $(BUILD) --models $(BENCH_DIR)/models --out $(BENCH_DIR) \
	  --chapters "$(CHAPTERS)" --types "$(BENCH_TYPES)" --backends "$(BENCH_BACKENDS)" \
	  --threads $(BENCH_THREADS) --tokens $(BENCH_TOKENS) --runs $(BENCH_RUNS)
