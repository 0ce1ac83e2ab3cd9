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
