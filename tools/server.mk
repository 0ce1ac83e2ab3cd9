# chat-server's end-to-end tests (included by the Makefile): build/tests/server
# starts each chapter's chat-server on a free port of 127.0.0.1 and talks to
# it over real sockets, in C and through the official `openai` npm client.
# make test runs them with the rest.
#> make server-test-deps                       the openai and @langchain/openai npm clients for the server
#>                                             tests, in build/node
#>                                             (npm installed from Debian as root if missing)
#> make memcheck-server                        the server's parsers and a chat-server under valgrind (part of
#>                                             make memcheck)

# The chapters that have a chat-server; the test binary drives each.
SERVER_CHAPTERS = $(foreach c,$(CHAPTERS),$(if $(wildcard chapters/$(c)/chat-server.c),$(c)))

# A wider model than the default one, so that on one scalar thread a request
# takes long enough for a test to act while it runs (a queue, a disconnect).
SERVER_SLOW_MODEL = $(BUILD)/models/server-slow.gguf
$(BUILD)/models/server-slow.gguf: $(BUILD)/tools/mkmodel
	@mkdir -p $(dir $@)
	$(BUILD)/tools/mkmodel --layers 4 --hidden 512 --heads 8 --kv-heads 4 --head-dim 64 --ffn 2048 --ctx 512 \
	  --type f32 -o $@

# The official client, from the npm registry: openai 6 on Node.js 20 and
# later, openai 5 on Node.js 18 (Debian 12's). make test installs it when npm
# is there, and otherwise the node test says so and is skipped; make
# server-test-deps (which CI runs) also installs npm, and fails if it cannot.
NODE_OPENAI = $(BUILD)/node/node_modules/openai/package.json
NPM_INSTALL_OPENAI = mkdir -p $(BUILD)/node && \
	major=$$(node -p 'process.versions.node.split(".")[0]') && \
	npm install --prefix $(BUILD)/node --no-audit --no-fund --loglevel=error \
	  openai@$$(if [ "$$major" -ge 20 ]; then echo 6; else echo 5; fi)
$(BUILD)/node/node_modules/openai/package.json:
	@if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then \
	  $(NPM_INSTALL_OPENAI) || echo "server tests: 'npm install openai' failed: the openai client test will be skipped"; \
	else echo "server tests: node or npm not found: the openai client test will be skipped (make server-test-deps)"; fi

# LangChain's ChatOpenAI, for the tool-call test (test_tools.c) and
# withStructuredOutput (test_structured.c): @langchain/openai 1.5.8 with
# @langchain/core 1.2.8 and zod 3, pinned exactly: versions whose engines
# include Node.js 20. On an older Node.js it is not installed and those
# client tests say so and skip.
NODE_LANGCHAIN = $(BUILD)/node/node_modules/@langchain/openai/package.json
NPM_INSTALL_LANGCHAIN = mkdir -p $(BUILD)/node && \
	major=$$(node -p 'process.versions.node.split(".")[0]') && \
	if [ "$$major" -ge 20 ]; then npm install --prefix $(BUILD)/node --no-audit --no-fund --loglevel=error \
	  --save-exact @langchain/openai@1.5.8 @langchain/core@1.2.8 zod@3.25.76; \
	else echo "server tests: Node.js $$major is older than LangChain needs (20): its tests will be skipped"; fi
$(BUILD)/node/node_modules/@langchain/openai/package.json: | $(NODE_OPENAI)
	@if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then \
	  $(NPM_INSTALL_LANGCHAIN) || echo "server tests: 'npm install @langchain/openai' failed: the LangChain tests will be skipped"; \
	else echo "server tests: node or npm not found: the LangChain tests will be skipped (make server-test-deps)"; fi

.PHONY: server-test-deps
server-test-deps:
	@command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 || tools/apt-install.sh server-test-deps npm
	@test -f $(NODE_OPENAI) || { $(NPM_INSTALL_OPENAI); }
	@test -f $(NODE_OPENAI) || { echo "make server-test-deps: the openai package did not install" >&2; exit 1; }
	@test -f $(NODE_LANGCHAIN) || { $(NPM_INSTALL_LANGCHAIN); }

SERVER_TEST_SRC = $(wildcard tests/server/*.c)
$(BUILD)/tests/server: $(SERVER_TEST_SRC) $(wildcard tests/server/*.h) tests/harness.c $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(COMMON_INC) -DSERVER_CHAPTERS='"$(SERVER_CHAPTERS)"' -o $@ \
	  $(filter %.c,$^) $(COMMON_LIB) $(LDLIBS)

EXTRA_TESTS += $(if $(SERVER_CHAPTERS),$(BUILD)/tests/server)
test: $(SERVER_SLOW_MODEL) $(NODE_OPENAI) $(NODE_LANGCHAIN)

# The 32-client load test at full size (make test runs it small: 32 clients for
# 3 s): 32 streaming clients for a minute against the last chapter's
# chat-server that runs requests side by side; every answer must be its solo
# answer, resident memory flat after the warm-up, the pool whole at the end.
#> make soak [SOAK_CLIENTS=32 SOAK_SECONDS=60]  the load test at full size: streaming clients against III.7's
#>                                             chat-server on loopback (same answers as alone, flat memory,
#>                                             every KV block back at the end); stops by itself
SOAK_CLIENTS ?= 32
SOAK_SECONDS ?= 60
.PHONY: soak
soak: $(BUILD)/tests/server $(ALL_PROGRAMS)
	SOAK_CLIENTS=$(SOAK_CLIENTS) SOAK_SECONDS=$(SOAK_SECONDS) $(BUILD)/tests/server server_soak

# make memcheck also runs the server's parsers, and a chat-server answering
# the API-key test (the node client included when installed) and stopped by
# SIGTERM, under valgrind: no invalid access, no leak, exit 0.
.PHONY: memcheck-server
memcheck: memcheck-server
memcheck-server: $(BUILD)/tests/common $(BUILD)/tests/server $(ALL_PROGRAMS) $(DEFAULT_MODEL)
	@command -v valgrind >/dev/null || tools/apt-install.sh memcheck valgrind
	$(VALGRIND) $(BUILD)/tests/common http stop gen_request openai > /dev/null
	SERVER_WRAPPER="$(VALGRIND)" $(BUILD)/tests/server server_api_key
