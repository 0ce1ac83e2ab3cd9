# The yardstick (never part of make test): llama.cpp's llama-bench,
# llama-batched-bench and llama-server, built once under build/llamacpp from the llama.cpp source
# that the npm package node-llama-cpp ships (tools/bench/llamacpp-build.sh), run
# on the same Qwen3-0.6B-shaped models as make bench (bench.mk makes them),
# interleaved with this engine: tools/bench/llamacpp.c prints the tables and
# writes build/bench/llamacpp.md and llamacpp.json. make bench-serve puts
# the last chapter's chat-server beside llama-server under one load.
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
#> make bench-serve                            the last chapter's chat-server and llama.cpp's llama-server
#>                                             under one streaming load (loadgen), same model file, slots
#>                                             and threads, rounds interleaved: output tok/s, TTFT and
#>                                             inter-token p50/p99, medians (tools/bench/serve.sh); writes
#>                                             build/bench/serve.json; knobs:
#>   BENCH_SERVE_TYPE=q8_0                     the model's weight type
#>   BENCH_SERVE_LOAD="32 8 64 32 1"           N requests, C at a time (the slots of both servers),
#>                                             prompt words, output tokens, temperature (each server's
#>                                             default sampler at it)
#>   BENCH_SERVE_ROUNDS=N                      rounds (default: 3); threads: BENCH_LLAMACPP_THREADS
#>   BENCH_SERVE_ENVS="SIMD_AMX=0"             one more row of our server per setting, run under it
#>                                             (an A/B of a kernel choice in the same rounds)
#> make llamacpp-build                         only build llama.cpp's benchmarks and server, in build/llamacpp
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

# The servers side by side: ours with C slots, llama-server with C slots (-np) of
# 1024 positions each, both on BENCH_LLAMACPP_THREADS threads.
BENCH_SERVE_TYPE   ?= q8_0
BENCH_SERVE_LOAD   ?= 32 8 64 32 1
BENCH_SERVE_ROUNDS ?= 3
SERVE_MODEL := $(BUILD)/bench/models/qwen3-0.6b-$(BENCH_SERVE_TYPE).gguf
SERVE_OURS  := $(BUILD)/$(lastword $(CHAPTERS))/chat-server
SERVE_C      = $(word 2,$(BENCH_SERVE_LOAD))
SERVE_ARGS   = $(SERVE_MODEL) --bind 127.0.0.1:@PORT@ --max-concurrent $(SERVE_C) \
  --queue $(word 1,$(BENCH_SERVE_LOAD)) --backend parallel --threads $(BENCH_LLAMACPP_THREADS)
.PHONY: bench-serve
bench-serve: BENCH_TYPES = $(BENCH_SERVE_TYPE)
bench-serve: llamacpp-build $(SERVE_OURS) $(BUILD)/tools/loadgen $(SERVE_MODEL)
	tools/bench/serve.sh $(BUILD)/tools/loadgen $(BUILD)/bench $(BENCH_SERVE_ROUNDS) "$(BENCH_SERVE_LOAD)" \
	  "$(lastword $(CHAPTERS)) chat-server=$(SERVE_OURS) $(SERVE_ARGS)" \
	  $(foreach e,$(BENCH_SERVE_ENVS),"$(lastword $(CHAPTERS)) chat-server $(subst =, ,$(e))=env $(e) $(SERVE_OURS) $(SERVE_ARGS)") \
	  "llama-server=$(LLAMACPP_DIR)/cmake/bin/llama-server -m $(SERVE_MODEL) --host 127.0.0.1 --port @PORT@ \
	    -np $(SERVE_C) -c $$(($(SERVE_C) * 1024)) -t $(BENCH_LLAMACPP_THREADS) -tb $(BENCH_LLAMACPP_THREADS)"
