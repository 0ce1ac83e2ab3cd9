# The benchmark suite (never part of make test). Included by the Makefile.
# Builds every chapter, tools/membw, tools/flops and tools/bench, makes the
# Qwen3-0.6B-shaped models with mkmodel (cached under build/bench/models/), and
# runs tools/bench, which prints the tables and writes build/bench/bench.md and
# bench.json: every chapter's prefill and decode, then III.7's batched decode.
#> make bench                                  benchmarks: bandwidth, prefill and decode speed of every
#>                                             chapter, type and backend; knobs (make variables):
#>   BENCH_TYPES=...                           weight types (default: f32 f16 bf16 q8_0 q4_0)
#>   BENCH_BACKENDS=...                        backends (default: simd parallel; scalar: minutes per type)
#>   BENCH_THREADS=N                           parallel threads (default: one per core)
#>   BENCH_TOKENS=N                            new tokens (default: 64; chapters without a KV cache: 4)
#>   BENCH_RUNS=N                              runs per figure, the best kept (default: 2)
#>   BENCH_BATCHES="1 2 4 8"                   batch sizes of III.7's batched-decode sweep ("": none)
#>   BENCH_BATCH_PROMPT=N BENCH_BATCH_STEPS=N  its prompt tokens per sequence and decode steps (128, 64)

BENCH_TYPES    ?= f32 f16 bf16 q8_0 q4_0
BENCH_BACKENDS ?= simd parallel
BENCH_THREADS  ?= 0
BENCH_TOKENS   ?= 64
BENCH_RUNS     ?= 2
BENCH_BATCHES  ?= 1 2 4 8
BENCH_BATCH_PROMPT ?= 128
BENCH_BATCH_STEPS  ?= 64
BENCH_DIR      := $(BUILD)/bench
BENCH_MODELS   := $(foreach t,$(BENCH_TYPES),$(BENCH_DIR)/models/qwen3-0.6b-$(t).gguf)

$(BUILD)/tools/bench: tools/bench/bench.c tools/bench/batched.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools/bench -Icommon -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/membw $(BUILD)/tools/flops $(BUILD)/tools/bench

# Made once and kept (order-only: a rebuilt mkmodel does not remake 2 GB of models).
$(BENCH_DIR)/models/qwen3-0.6b-%.gguf: | $(MKMODEL)
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset qwen3-0.6b --type $* -o $@

# The models are precious: a failed or interrupted bench keeps them.
.PRECIOUS: $(BENCH_DIR)/models/qwen3-0.6b-%.gguf

bench: $(ALL_PROGRAMS) $(BUILD)/tools/membw $(BUILD)/tools/flops $(BUILD)/tools/bench $(BENCH_MODELS)
	$(BUILD)/tools/bench --build $(BUILD) --models $(BENCH_DIR)/models --out $(BENCH_DIR) \
	  --chapters "$(CHAPTERS)" --types "$(BENCH_TYPES)" --backends "$(BENCH_BACKENDS)" \
	  --threads $(BENCH_THREADS) --tokens $(BENCH_TOKENS) --runs $(BENCH_RUNS) \
	  --batches "$(BENCH_BATCHES)" --batch-prompt $(BENCH_BATCH_PROMPT) --batch-steps $(BENCH_BATCH_STEPS)
