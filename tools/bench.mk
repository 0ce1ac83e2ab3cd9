# make bench: the benchmark suite (never part of make test). Included by the
# Makefile. Builds every chapter, tools/membw and tools/bench, makes the
# Qwen3-0.6B-shaped models with mkmodel (cached under build/bench/models/), and
# runs tools/bench, which prints the tables and writes build/bench/bench.md and
# build/bench/bench.json: every chapter, type and backend, then the decode step
# of the basic and the paged KV cache at long contexts (tools/bench/kv_bench.c,
# on the first type and the last backend). Knobs (make variables):
#   BENCH_TYPES    weight types        (default: f32 f16 bf16 q8_0 q4_0)
#   BENCH_BACKENDS backends            (default: simd parallel; add scalar for the reference,
#                                       which takes minutes per type on these shapes)
#   BENCH_THREADS  parallel threads    (default: one per core)
#   BENCH_TOKENS   new tokens          (default: 64; chapters without a KV cache: 4)
#   BENCH_RUNS     runs per figure, the best kept (default: 2)
#   BENCH_KV_CONTEXTS contexts of the KV table (default: 256 1024 2048; empty: no table)
#   BENCH_KV_TOKENS   decode steps per run at each (default: 16; the median over the runs kept)

BENCH_TYPES    ?= f32 f16 bf16 q8_0 q4_0
BENCH_BACKENDS ?= simd parallel
BENCH_THREADS  ?= 0
BENCH_TOKENS   ?= 64
BENCH_RUNS     ?= 2
BENCH_KV_CONTEXTS ?= 256 1024 2048
BENCH_KV_TOKENS   ?= 16
BENCH_DIR      := $(BUILD)/bench
BENCH_MODELS   := $(foreach t,$(BENCH_TYPES),$(BENCH_DIR)/models/qwen3-0.6b-$(t).gguf)

$(BUILD)/tools/bench: tools/bench/bench.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icommon -o $@ $^ $(LDLIBS)

# kv-bench runs the engine of the last chapter with a paged cache in process.
KV_BENCH_CHAPTER := $(lastword $(foreach c,$(CHAPTERS),$(if $(wildcard chapters/$(c)/kv_paged.c),$(c))))
KV_BENCH := $(if $(KV_BENCH_CHAPTER),$(BUILD)/tools/kv-bench)
$(BUILD)/tools/kv-bench: tools/bench/kv_bench.c $($(KV_BENCH_CHAPTER)_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ichapters/$(KV_BENCH_CHAPTER) -Icommon -o $@ $^ $(LDLIBS)

# Made once and kept (order-only: a rebuilt mkmodel does not remake 2 GB of models).
$(BENCH_DIR)/models/qwen3-0.6b-%.gguf: | $(MKMODEL)
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset qwen3-0.6b --type $* -o $@

# The models are precious: a failed or interrupted bench keeps them.
.PRECIOUS: $(BENCH_DIR)/models/qwen3-0.6b-%.gguf

bench: $(ALL_PROGRAMS) $(BUILD)/tools/membw $(BUILD)/tools/bench $(KV_BENCH) $(BENCH_MODELS)
	$(BUILD)/tools/bench --build $(BUILD) --models $(BENCH_DIR)/models --out $(BENCH_DIR) \
	  --chapters "$(CHAPTERS)" --types "$(BENCH_TYPES)" --backends "$(BENCH_BACKENDS)" \
	  --threads $(BENCH_THREADS) --tokens $(BENCH_TOKENS) --runs $(BENCH_RUNS) \
	  --kv-contexts "$(BENCH_KV_CONTEXTS)" --kv-tokens $(BENCH_KV_TOKENS)
