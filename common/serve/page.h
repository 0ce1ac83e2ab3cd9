/* page.h: chat-server's live page (GET /): one self-contained HTML file,
 * common/serve/page/index.html, with its CSS and JS inline. tools/page.mk
 * turns it into a byte array compiled into every chat-server, so the page
 * works offline and nothing is read from disk at run time. */
#ifndef PAGE_H
#define PAGE_H

#include <stddef.h>

extern const unsigned char page_html[]; /* [page_html_len] the HTML, UTF-8 */
extern const size_t page_html_len;

#endif
