# The benchmark suite (never part of make test). Included by the Makefile.
# Builds every chapter, tools/membw, tools/flops and tools/bench, makes the
# Qwen3-0.6B-shaped models with mkmodel (cached under build/bench/models/), and
# runs tools/bench, which prints the tables and writes build/bench/bench.md and
# bench.json: every chapter's prefill and decode, then III.7's batched decode.
#> make bench                                  benchmarks: bandwidth, prefill and decode speed of every
#>                                             chapter, type and backend; first says the disk space its
#>                                             models take and checks it; knobs (make variables):
#>   BENCH_TYPES=...                           weight types, any mkmodel --type (default: q8_0 q4_0, 1.0 GB
#>                                             of models; all: f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m q6_k
#>                                             iq4_xs; q4_0 is llama-quantize's mix with Q4_1)
#>   BENCH_BACKENDS=...                        backends (default: simd parallel; scalar: minutes per type)
#>   BENCH_THREADS=N                           parallel threads (default: one per core)
#>   BENCH_TOKENS=N                            new tokens (default: 64; chapters without a KV cache: 4)
#>   BENCH_RUNS=N                              runs per figure, the best kept (default: 2)
#>   BENCH_KV_CONTEXTS=...                     contexts of the basic-vs-paged KV table (default: 256 1024 2048;
#>                                             empty: no table)
#>   BENCH_KV_TOKENS=N                         decode steps per run at each context (default: 16, median kept)
#>   BENCH_BATCHES="1 2 4 8"                   batch sizes of III.7's batched-decode sweep ("": none)
#>   BENCH_BATCH_PROMPT=N BENCH_BATCH_STEPS=N  its prompt tokens per sequence and decode steps (128, 64)
#>   BENCH_AB_LOAD="N C PROMPT OUTPUT"         III.7's A/B for every type: N streaming requests, C at a time,
#>                                             PROMPT-word prompts, OUTPUT tokens each, against chat-server
#>                                             --max-concurrent 1 then C (default "16 8 16 64"; "": none)
#> make bench-space [BENCH_TYPES=...]          only say what disk space the bench models take, and check it

BENCH_TYPES    ?= q8_0 q4_0
override BENCH_TYPES := $(if $(filter all,$(BENCH_TYPES)),f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m q6_k iq4_xs,$(BENCH_TYPES))
BENCH_BACKENDS ?= simd parallel
BENCH_THREADS  ?= 0
BENCH_TOKENS   ?= 64
BENCH_RUNS     ?= 2
BENCH_KV_CONTEXTS ?= 256 1024 2048
BENCH_KV_TOKENS   ?= 16
BENCH_BATCHES  ?= 1 2 4 8
BENCH_BATCH_PROMPT ?= 128
BENCH_BATCH_STEPS  ?= 64
BENCH_AB_LOAD  ?= 16 8 16 64
BENCH_AB_SERVER := $(BUILD)/$(lastword $(CHAPTERS))/chat-server
BENCH_DIR      := $(BUILD)/bench
BENCH_MODELS   := $(foreach t,$(BENCH_TYPES),$(BENCH_DIR)/models/qwen3-0.6b-$(t).gguf)

$(BUILD)/tools/bench: tools/bench/bench.c tools/bench/batched.c tools/bench/ab.c tools/bench/command.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools/bench $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/membw $(BUILD)/tools/flops $(BUILD)/tools/bench

# Constrained sampling's cost per token (common/run/grammar.c): on Qwen's real
# vocabulary when ../shared has it, else on the bench model's (151,936 ids,
# mostly unused fillers: say which, the tool prints the trie's size).
#> make bench-grammar                          constrained sampling's cost per token: grammar_mask over the
#>                                             whole vocabulary at each step of a JSON reply, with and
#>                                             without the trie, on the Q8_0 bench model's vocabulary
#>                                             (made first if missing); writes build/bench/grammar.txt
GRAMMAR_BENCH_VOCAB := $(or $(wildcard ../shared/reference/tokenizer/ggml-vocab-qwen2.gguf),$(firstword $(BENCH_MODELS)))
$(BUILD)/tools/grammar-bench: tools/bench/grammar_bench.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/grammar-bench
.PHONY: bench-grammar
bench-grammar: $(BUILD)/tools/grammar-bench $(GRAMMAR_BENCH_VOCAB)
	@mkdir -p $(BENCH_DIR)
	$(BUILD)/tools/grammar-bench $(GRAMMAR_BENCH_VOCAB) 7 | tee $(BENCH_DIR)/grammar.txt
bench: bench-grammar

# kv-bench runs the engine of the last chapter with a paged cache in process.
KV_BENCH_CHAPTER := $(lastword $(foreach c,$(CHAPTERS),$(if $(wildcard chapters/$(c)/kv_paged.c),$(c))))
KV_BENCH := $(if $(KV_BENCH_CHAPTER),$(BUILD)/tools/kv-bench)
$(BUILD)/tools/kv-bench: tools/bench/kv_bench.c $($(KV_BENCH_CHAPTER)_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ichapters/$(KV_BENCH_CHAPTER) $(COMMON_INC) -o $@ $^ $(LDLIBS)

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

bench: bench-space $(ALL_PROGRAMS) $(BUILD)/tools/membw $(BUILD)/tools/flops $(BUILD)/tools/bench $(KV_BENCH) \
	  $(BUILD)/tools/loadgen $(BENCH_MODELS)
	$(BUILD)/tools/bench --build $(BUILD) --models $(BENCH_DIR)/models --out $(BENCH_DIR) \
	  --chapters "$(CHAPTERS)" --types "$(BENCH_TYPES)" --backends "$(BENCH_BACKENDS)" \
	  --threads $(BENCH_THREADS) --tokens $(BENCH_TOKENS) --runs $(BENCH_RUNS) \
	  --kv-contexts "$(BENCH_KV_CONTEXTS)" --kv-tokens $(BENCH_KV_TOKENS) \
	  --batches "$(BENCH_BATCHES)" --batch-prompt $(BENCH_BATCH_PROMPT) --batch-steps $(BENCH_BATCH_STEPS) \
	  --ab-load "$(BENCH_AB_LOAD)" --ab-server $(BENCH_AB_SERVER) --loadgen $(BUILD)/tools/loadgen

# III.7's A/B alone: the same streaming load (tools/loadgen) against the last
# chapter's chat-server with --max-concurrent 1, then with C slots; prints both
# and the ratio of aggregate output tokens/s, writes build/bench/ab.json (one
# object, the fields of an element of bench.json's "ab").
#> make bench-ab [BENCH_AB_TYPE=q8_0]          III.7's A/B alone, on one type: one streaming load against
#>   [BENCH_AB_LOAD="N C PROMPT OUTPUT"]       chat-server --max-concurrent 1 and C, the ratio; writes
#>                                             build/bench/ab.json (default load "16 8 16 64")
BENCH_AB_TYPE ?= $(firstword $(BENCH_TYPES))
.PHONY: bench-ab
bench-ab: $(BENCH_AB_SERVER) $(BUILD)/tools/loadgen $(BENCH_DIR)/models/qwen3-0.6b-$(BENCH_AB_TYPE).gguf
	tools/bench/ab.sh $(BENCH_AB_SERVER) $(BUILD)/tools/loadgen $(BENCH_DIR)/models/qwen3-0.6b-$(BENCH_AB_TYPE).gguf \
	  $(BENCH_DIR) $(or $(strip $(BENCH_AB_LOAD)),16 8 16 64) '--backend parallel $(if $(filter-out 0,$(BENCH_THREADS)),--threads $(BENCH_THREADS))'

# Prefill chunk against inter-token latency: a tick prefills at most
# --prefill-chunk prompt tokens, and every decoding slot waits for them.
#> make bench-chunk                            III.7's chat-server under long prompts at several prefill
#>                                             chunk sizes and time budgets, rounds interleaved: output
#>                                             tok/s, TTFT and inter-token p50/p99, medians
#>                                             (tools/bench/serve.sh); knobs:
#>   BENCH_CHUNKS="32 64 128 256"              the --prefill-chunk values
#>   BENCH_PREFILL_MS="500 1000"               the --prefill-ms values (each with the default chunk)
#>   BENCH_CHUNK_LOAD="12 6 256 32 1"          N requests, C at a time (slots), prompt words, output tokens,
#>                                             temperature (about 20 minutes on 2 AVX2 cores)
#>   BENCH_CHUNK_ROUNDS=N BENCH_CHUNK_TYPE=q8_0  rounds (default 2), the model's weight type
BENCH_CHUNKS       ?= 32 64 128 256
BENCH_PREFILL_MS   ?= 500 1000
BENCH_CHUNK_LOAD   ?= 12 6 256 32 1
BENCH_CHUNK_ROUNDS ?= 2
BENCH_CHUNK_TYPE   ?= q8_0
BENCH_CHUNK_MODEL  := $(BENCH_DIR)/models/qwen3-0.6b-$(BENCH_CHUNK_TYPE).gguf
.PHONY: bench-chunk
bench-chunk: BENCH_TYPES = $(BENCH_CHUNK_TYPE)
bench-chunk: $(BENCH_AB_SERVER) $(BUILD)/tools/loadgen $(BENCH_CHUNK_MODEL)
	tools/bench/serve.sh $(BUILD)/tools/loadgen $(BENCH_DIR)/chunk $(BENCH_CHUNK_ROUNDS) "$(BENCH_CHUNK_LOAD)" \
	  $(foreach k,$(BENCH_CHUNKS),"--prefill-chunk $(k)=$(BENCH_CHUNK_SERVER) --prefill-chunk $(k)") \
	  $(foreach m,$(BENCH_PREFILL_MS),"--prefill-ms $(m)=$(BENCH_CHUNK_SERVER) --prefill-ms $(m)")
BENCH_CHUNK_SERVER = $(BENCH_AB_SERVER) $(BENCH_CHUNK_MODEL) --bind 127.0.0.1:@PORT@ \
  --max-concurrent $(word 2,$(BENCH_CHUNK_LOAD)) --queue $(word 1,$(BENCH_CHUNK_LOAD)) --backend parallel \
  $(if $(filter-out 0,$(BENCH_THREADS)),--threads $(BENCH_THREADS))

# What choosing a token costs, per sampler setting (tools/bench/sampling_bench.c).
#> make bench-sampling                         ms per chosen token at Qwen3's 151,936-token vocabulary, per
#>                                             sampler setting: medians of interleaved rounds, and the spread,
#>                                             with the logits cold (from memory) and warm (in the cache)
$(BUILD)/tools/sampling-bench: tools/bench/sampling_bench.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/sampling-bench
.PHONY: bench-sampling
bench-sampling: $(BUILD)/tools/sampling-bench
	$(BUILD)/tools/sampling-bench
