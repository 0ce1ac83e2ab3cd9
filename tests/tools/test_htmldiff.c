/* test_htmldiff.c: the side-by-side HTML page (tools/chapters/htmldiff.c) on
 * the real II.1 -> II.2 pair, and its escaping. */
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "htmldiff.h"
#include "manifest.h"

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Writes the page for from -> to in dir; returns its text (malloc'd) or NULL. */
static char *page(const char *dir, const char *from, const char *to, const char *name) {
    char err[512] = "";
    const char *out = test_tmp_path(name);
    int rc = htmldiff_write(dir, from, to, out, err, sizeof err);
    CHECK_MSG(rc == 0, "htmldiff_write: %s", err);
    return rc == 0 ? chapfs_read(out, NULL) : NULL;
}

static void check_well_formed(const char *html) {
    CHECK(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    CHECK(strstr(html, "</body>\n</html>\n") != NULL);
    CHECK(count(html, "<table") > 0);
    CHECK_EQ_INT(count(html, "<table"), count(html, "</table>"));
    CHECK_EQ_INT(count(html, "<tr"), count(html, "</tr>"));
    CHECK_EQ_INT(count(html, "<td"), count(html, "</td>"));
    CHECK_EQ_INT(count(html, "<span"), count(html, "</span>"));
    CHECK_EQ_INT(count(html, "<details"), count(html, "</details>"));
}

/* The fragment for the book's chapter pages: the same sections, each file
 * folded in a <details> named by its path, no page around it, the headings a
 * level down, and no style that reaches outside the diff's own classes. */
TEST(htmldiff_fragment_folds_each_file) {
    char err[512] = "";
    const char *out = test_tmp_path("II.1..II.2.part.html");
    CHECK_MSG(htmldiff_write_as("chapters", "II.1", "II.2", out, true, true, err, sizeof err) == 0, "%s", err);
    char *html = chapfs_read(out, NULL), *full = page("chapters", "II.1", "II.2", "full.html");
    if (!html || !full) return;
    CHECK(strncmp(html, "<div class=\"chapdiff\">", 22) == 0 && !strstr(html, "<body") && !strstr(html, "<h2"));
    CHECK_EQ_INT(count(html, "<details class=\"file\" id=\"file-"), count(full, "<h2 id=\"file-"));
    CHECK(count(html, "<details class=\"file\"") > 1);
    CHECK_EQ_INT(count(html, "<details"), count(html, "</details>"));
    CHECK_EQ_INT(count(html, "<h4 id=\"fn-"), count(full, "<h3 id=\"fn-"));
    CHECK(strstr(html, "<h3 id=\"summary\">") && !strstr(html, "body{") && !strstr(html, "\ncode,"));
    free(html);
    free(full);
}

TEST(htmldiff_real_chapters) {
    char *html = page("chapters", "II.1", "II.2", "II.1..II.2.html");
    if (!html) return;
    check_well_formed(html);
    /* every function the manifest declares changed has its own section */
    char *text = chapfs_read("chapters/II.2/MANIFEST", NULL);
    Manifest m;
    StrList problems = {0};
    CHECK(text && manifest_parse(text, "II.2", &m, &problems) == 0);
    for (int c = 0; c < m.n_changed; c++)
        for (int i = 0; i < m.changed[c].fns.n; i++) {
            char *h = chapfs_printf("<code>%s</code> <span class=\"badge", m.changed[c].fns.items[i]);
            CHECK_MSG(strstr(html, h), "no section for function %s", m.changed[c].fns.items[i]);
            free(h);
        }
    for (int i = 0; i < m.added.n; i++) CHECK_MSG(strstr(html, m.added.items[i]), "added file %s not shown",
                                                  m.added.items[i]);
    CHECK(strstr(html, "Manifest check: ok") != NULL);
    CHECK(strstr(html, "class=\"c del\"") && strstr(html, "class=\"c ins\""));
    manifest_free(&m);
    strlist_free(&problems);
    free(text);
    free(html);
}

/* Code reaches the page escaped, and a function change shows both sides. */
TEST(htmldiff_escapes_code) {
    static const char *const ONE[] = {"II.2", NULL};
    char *dir = fx_chapters("html-escape", ONE);
    fx_copy_chapter(dir, "II.2", "II.3", "previous II.2\nchanged forward.c: escaped_fn\n");
    fx_write(dir, "II.3/forward.c", "");
    char *old = chapfs_read("chapters/II.2/forward.c", NULL);
    char *new = chapfs_printf("%s\nstatic int escaped_fn(int a, int b) {\n    return a < b && b > 0 ? '\"' : 0;\n}\n",
                              old ? old : "");
    fx_write(dir, "II.3/forward.c", new);
    char *html = page(dir, "II.2", "II.3", "escape.html");
    if (html) {
        check_well_formed(html);
        CHECK(strstr(html, "a &lt; b &amp;&amp; b &gt; 0 ? &#39;&quot;&#39; : 0;") != NULL);
        CHECK(strstr(html, "a < b") == NULL);
        CHECK(strstr(html, "Manifest check: ok") != NULL);
        CHECK(strstr(html, "1 function added") != NULL);
    }
    free(html);
    free(old);
    free(new);
    free(dir);
}

TEST(htmldiff_escape_function) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    htmldiff_escape(f, "<a href=\"x\">&'</a>", 18);
    fclose(f);
    CHECK_STR(buf, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
    free(buf);
}

TEST(htmldiff_unknown_chapter) {
    char err[512] = "";
    CHECK(htmldiff_write("chapters", "II.1", "II.9", test_tmp_path("none.html"), err, sizeof err) != 0);
    CHECK(strstr(err, "II.9") != NULL);
}
