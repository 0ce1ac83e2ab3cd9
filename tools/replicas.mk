# Several chat-servers behind HAProxy (included by the Makefile; the book's
# "Beyond one process"): tools/replicas/run.sh starts the replicas on free
# loopback ports and HAProxy with tools/replicas/haproxy.cfg in front of them,
# routing by prompt prefix so that each replica's prefix cache keeps hitting.
#> make replicas [N=2 MODEL=f.gguf PORT=8000]  N chat-servers of the last chapter and HAProxy in front,
#>   [ARGS=...]                                routing each request by its prefix (HAProxy installed from
#>                                             Debian as root if missing); prints the URL, Ctrl-C stops all
#> make replicas-deps                          HAProxy, from Debian (as root), for make replicas and its test
#> make bench-replicas [REPLICAS_LOAD=...]     2 replicas of the Qwen3-0.6B-shaped Q8_0 model: round robin
#>                                             against prefix affinity (cache share, TTFT, tokens/s), then one
#>                                             replica killed mid-run; writes build/bench/replicas.json
#
# N means new tokens elsewhere (make run): here it counts replicas, 2 unless
# given on the command line.
REPLICAS_N      = $(if $(filter command line,$(origin N)),$(N),2)
REPLICAS_PORT   = $(or $(PORT),8000)
REPLICAS_SERVER = $(BUILD)/$(lastword $(CHAPTERS))/chat-server
REPLICAS_RUN    = tools/replicas/run.sh

.PHONY: replicas replicas-deps bench-replicas
replicas-deps:
	@command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || tools/apt-install.sh replicas haproxy

replicas: replicas-deps $(REPLICAS_SERVER) $(if $(filter $(DEFAULT_MODEL),$(MODEL)),$(DEFAULT_MODEL))
	$(REPLICAS_RUN) --port $(REPLICAS_PORT) --dir $(BUILD)/replicas $(REPLICAS_SERVER) $(MODEL) $(REPLICAS_N) $(ARGS)

# The comparison: tools/replicas/bench.sh runs the same multi-turn load
# (tools/loadgen --conversations) against the two balances, fresh replicas
# each, then kills a replica in the middle of a third run.
#   REPLICAS_LOAD="K T C SYSTEM USER OUTPUT": K conversations of T turns, C at a time,
#   SYSTEM-token system prompts, USER-token user messages, OUTPUT tokens per answer.
REPLICAS_LOAD  ?= 6 3 3 128 32 8
REPLICAS_MODEL  = $(BENCH_DIR)/models/qwen3-0.6b-q8_0.gguf
bench-replicas: replicas-deps $(REPLICAS_SERVER) $(BUILD)/tools/loadgen $(REPLICAS_MODEL)
	tools/replicas/bench.sh $(REPLICAS_SERVER) $(BUILD)/tools/loadgen $(REPLICAS_MODEL) $(BUILD)/bench $(REPLICAS_LOAD)

# The test starts the replicas and the balancer itself (tests/replicas); it is
# skipped, saying why, when haproxy is missing (CI runs make replicas-deps first).
REPLICAS_TEST_SRC := $(wildcard tests/replicas/*.c) tests/loadgen/run_loadgen.c
$(BUILD)/tests/replicas: $(REPLICAS_TEST_SRC) tests/harness.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Itests/loadgen $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TESTS += $(BUILD)/tests/replicas
test: $(REPLICAS_SERVER) $(BUILD)/tools/loadgen
