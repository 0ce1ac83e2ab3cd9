# chat-server's live page (included by the Makefile): common/serve/page/index.html,
# the HTML, CSS and JS of GET /, turned into a byte array (tools/embed.sh) that is
# compiled into common/'s library, so every chat-server serves it offline.
#> make page-test                              loads chat-server's page (GET /) in headless Chromium against
#>                                             III.4's and III.7's servers (chromium from Debian, puppeteer-core
#>                                             from npm, installed if missing): chat, live pool, slots, tree
PAGE_SRC := common/serve/page/index.html
PAGE_C   := $(BUILD)/gen/page_html.c
PAGE_OBJ := $(BUILD)/obj/gen/page_html.o

$(PAGE_C): $(PAGE_SRC) tools/embed.sh
	@mkdir -p $(dir $@)
	tools/embed.sh page_html $(PAGE_SRC) > $@.tmp && mv $@.tmp $@
$(PAGE_OBJ): $(PAGE_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
$(COMMON_LIB): $(PAGE_OBJ)

# The page in a real browser: Chromium from Debian, puppeteer-core from npm
# (the rule book-check uses, tools/book.mk). Not part of make test: it starts
# a browser and four servers and takes about half a minute; CI runs it.
.PHONY: page-test
page-test: $(BUILD)/III.4/chat-server $(BUILD)/III.7/chat-server $(DEFAULT_MODEL) $(PUPPETEER)
	@command -v chromium >/dev/null || tools/apt-install.sh page-test chromium
	node tests/server/page_check.mjs $$(command -v chromium) $(BUILD) $(DEFAULT_MODEL) III.4 III.7

# Does a stalled /v1/events reader slow the engine? III.7's scheduler in
# process, the same requests with no event hub, with one nobody listens to,
# and with a subscriber that never reads: interleaved rounds, medians.
#> make bench-events [MODEL=f.gguf]            the engine's throughput with a stalled event-stream reader
#>                                             attached vs none (III.7 in process; medians of interleaved rounds)
EVENTS_BENCH_CHAPTER := III.7
$(BUILD)/tools/events-bench: tools/bench/events_bench.c $($(EVENTS_BENCH_CHAPTER)_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ichapters/$(EVENTS_BENCH_CHAPTER) $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TOOLS += $(BUILD)/tools/events-bench

.PHONY: bench-events
bench-events: $(BUILD)/tools/events-bench $(MODEL)
	$(BUILD)/tools/events-bench --backend scalar $(MODEL)
