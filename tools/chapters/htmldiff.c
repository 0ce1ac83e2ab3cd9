/* htmldiff.c: see htmldiff.h. */
#include "htmldiff.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cfuncs.h"
#include "chapfs.h"
#include "linediff.h"
#include "manifest.h"

#define CONTEXT 3 /* unchanged lines around a unified hunk */

typedef enum { F_ADDED, F_REMOVED, F_CHANGED, F_SAME } FileStatus;

/* One file of either chapter, with what the page needs to show it. */
typedef struct {
    char *path;
    FileStatus status;
    char *old, *new; /* contents; NULL where the file does not exist */
    size_t old_len, new_len;
    bool is_c;
    CFuncList old_fns, new_fns;
    FnDiff *fd;
    int n_fd;
    char *old_skel, *new_skel; /* text outside functions */
    int *old_skel_line, *new_skel_line;
    bool outside_changed;
} FileEntry;

typedef struct {
    const char *from, *to;
    FileEntry *files;
    int n_files;
    int h; /* the level of the page's section headings: 2, or 3 in a fragment */
} Page;

/* ---- escaping and small writers ------------------------------------------ */

void htmldiff_escape(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        case '\r': break; /* CRLF files: the row is the line */
        default: fputc(s[i], f);
        }
    }
}

static void esc(FILE *f, const char *s) { htmldiff_escape(f, s, strlen(s)); }

/* An id usable in href="#...": letters, digits, '-' and '_' only. */
static void write_id_part(FILE *f, const char *s) {
    for (; s && *s; s++) {
        char c = *s;
        bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        fputc(ok ? c : '-', f);
    }
}

static void write_id(FILE *f, const char *prefix, const char *file, const char *fn) {
    fputs(prefix, f);
    write_id_part(f, file);
    if (fn) {
        fputs("--", f);
        write_id_part(f, fn);
    }
}

/* The page's own style; STYLE_DIFF is the diff's, which a fragment carries
 * into the book's pages (classes only, so it leaves the page around it alone). */
static const char *const STYLE_PAGE =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#1f2328}\n"
    "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #d0d7de}\n"
    "h3{font-size:1em;margin:1.2em 0 .3em}\n"
    "code,pre{font-family:ui-monospace,Consolas,monospace;font-size:12.5px}\n";
static const char *const STYLE_DIFF =
    "td.c{font-family:ui-monospace,Consolas,monospace;font-size:12.5px}\n"
    "table.sbs,table.uni,table.file{border-collapse:collapse;width:100%;table-layout:fixed;"
    "border:1px solid #d0d7de}\n"
    "td.c{white-space:pre-wrap;word-break:break-all;tab-size:4;padding:0 .5em;vertical-align:top}\n"
    "td.n{width:3.5em;color:#6e7781;text-align:right;padding:0 .4em;vertical-align:top;"
    "font-family:ui-monospace,monospace;font-size:12px;user-select:none}\n"
    "td.del{background:#ffebe9}td.ins{background:#e6ffec}td.none{background:#f6f8fa}\n"
    "span.x{border-radius:2px}td.del span.x{background:#ffb3ad}td.ins span.x{background:#8ce59f}\n"
    "tr.hunk td{background:#ddf4ff;color:#57606a;font-family:ui-monospace,monospace;font-size:12px;"
    "padding:.1em .5em}\n"
    "table.summary{border-collapse:collapse}table.summary td,table.summary th{border:1px solid #d0d7de;"
    "padding:.2em .6em;text-align:left}\n"
    ".badge{font-size:.8em;padding:.05em .5em;border-radius:1em;color:#fff;font-weight:normal}\n"
    ".added{background:#1a7f37}.removed{background:#cf222e}.changed{background:#9a6700}\n"
    ".ok{color:#1a7f37}.bad{color:#cf222e}.note{color:#57606a}\n";

/* ---- the model: which files and functions changed ------------------------ */

static bool same_bytes(const FileEntry *e) {
    return e->old_len == e->new_len && memcmp(e->old, e->new, e->old_len) == 0;
}

/* Splits a changed C file into functions and outside text, and compares both. */
static void analyze_c(FileEntry *e) {
    cfuncs_split(e->old, e->old_len, &e->old_fns);
    cfuncs_split(e->new, e->new_len, &e->new_fns);
    e->n_fd = cfuncs_compare(e->old, &e->old_fns, e->new, &e->new_fns, &e->fd);
    e->old_skel = cfuncs_skeleton(e->old, e->old_len, &e->old_fns, &e->old_skel_line);
    e->new_skel = cfuncs_skeleton(e->new, e->new_len, &e->new_fns, &e->new_skel_line);
    e->outside_changed = strcmp(e->old_skel, e->new_skel) != 0;
}

static char *read_in(const char *dir, const char *file, size_t *len) {
    char *path = chapfs_printf("%s/%s", dir, file);
    char *s = chapfs_read(path, len);
    free(path);
    return s;
}

static void load_entry(FileEntry *e, const char *old_dir, const char *new_dir, const char *path) {
    *e = (FileEntry){.path = chapfs_strdup(path), .is_c = cfuncs_is_c_file(path)};
    e->old = read_in(old_dir, path, &e->old_len);
    e->new = read_in(new_dir, path, &e->new_len);
    e->status = !e->old ? F_ADDED : !e->new ? F_REMOVED : same_bytes(e) ? F_SAME : F_CHANGED;
    if (e->status == F_CHANGED && e->is_c) analyze_c(e);
}

static void free_entry(FileEntry *e) {
    free(e->path);
    free(e->old);
    free(e->new);
    cfuncs_free(&e->old_fns);
    cfuncs_free(&e->new_fns);
    free(e->fd);
    free(e->old_skel);
    free(e->new_skel);
    free(e->old_skel_line);
    free(e->new_skel_line);
}

static void load_page(Page *p, const char *old_dir, const char *new_dir) {
    StrList all = {0}, b = {0};
    chapfs_list_files(old_dir, &all);
    chapfs_list_files(new_dir, &b);
    for (int i = 0; i < b.n; i++)
        if (strlist_find(&all, b.items[i]) < 0) strlist_push(&all, b.items[i]);
    strlist_sort(&all);
    p->files = chapfs_xmalloc(sizeof(FileEntry) * (size_t)(all.n ? all.n : 1));
    p->n_files = all.n;
    for (int i = 0; i < all.n; i++) load_entry(&p->files[i], old_dir, new_dir, all.items[i]);
    strlist_free(&all);
    strlist_free(&b);
}

/* ---- rows of code -------------------------------------------------------- */

/* Writes one code cell; the bytes [hl_a, hl_b) are marked as the changed part. */
static void code_cell(FILE *f, const Line *l, const char *cls, int hl_a, int hl_b) {
    fprintf(f, "<td class=\"c %s\">", cls);
    if (l && hl_b > hl_a) {
        htmldiff_escape(f, l->s, (size_t)hl_a);
        fputs("<span class=\"x\">", f);
        htmldiff_escape(f, l->s + hl_a, (size_t)(hl_b - hl_a));
        fputs("</span>", f);
        htmldiff_escape(f, l->s + hl_b, (size_t)(l->len - hl_b));
    } else if (l) {
        htmldiff_escape(f, l->s, (size_t)l->len);
    }
    fputs("</td>", f);
}

static void num_cell(FILE *f, int n) {
    if (n > 0) fprintf(f, "<td class=\"n\">%d</td>", n);
    else fputs("<td class=\"n\"></td>", f);
}

static bool utf8_cont(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

/* The differing middle of two paired lines: common prefix p and suffix s,
 * moved off UTF-8 continuation bytes so no character is split. */
static void line_middle(const Line *x, const Line *y, int *p, int *s) {
    int n = x->len < y->len ? x->len : y->len, a = 0, b = 0;
    while (a < n && x->s[a] == y->s[a]) a++;
    while (a > 0 && (utf8_cont(x->s[a]) || (a < y->len && utf8_cont(y->s[a])))) a--;
    while (b < n - a && x->s[x->len - 1 - b] == y->s[y->len - 1 - b]) b++;
    while (b > 0 && (utf8_cont(x->s[x->len - b]) || utf8_cont(y->s[y->len - b]))) b--;
    *p = a, *s = b;
}

/* One side-by-side row; a NULL line leaves its side empty. Paired changed
 * lines get their differing middle marked, unless the whole line differs. */
static void sbs_row(FILE *f, const Line *l, int ln, const char *lcls, const Line *r, int rn, const char *rcls) {
    int p = 0, s = 0;
    bool mark = l && r && strcmp(lcls, "del") == 0;
    if (mark) line_middle(l, r, &p, &s);
    mark = mark && (p > 0 || s > 0);
    fputs("<tr>", f);
    num_cell(f, l ? ln : 0);
    code_cell(f, l, l ? lcls : "none", mark ? p : 0, mark ? l->len - s : 0);
    num_cell(f, r ? rn : 0);
    code_cell(f, r, r ? rcls : "none", mark ? p : 0, mark ? r->len - s : 0);
    fputs("</tr>\n", f);
}

static void sbs_begin(FILE *f, const Page *pg) {
    fputs("<table class=\"sbs\"><colgroup><col style=\"width:3.5em\"><col><col style=\"width:3.5em\"><col>"
          "</colgroup>\n<thead><tr><th colspan=\"2\">", f);
    esc(f, pg->from);
    fputs("</th><th colspan=\"2\">", f);
    esc(f, pg->to);
    fputs("</th></tr></thead><tbody>\n", f);
}

static void sbs_end(FILE *f) { fputs("</tbody></table>\n", f); }

/* A changed run of the edit script, [i, j): removals beside additions. */
static void sbs_change(FILE *f, const LdOp *ops, int i, int j, const Lines *a, int a0, const Lines *b, int b0) {
    int nd = 0;
    while (i + nd < j && ops[i + nd].kind == LD_DEL) nd++;
    int ni = j - i - nd;
    for (int k = 0; k < nd || k < ni; k++) {
        const LdOp *d = k < nd ? &ops[i + k] : NULL, *n = k < ni ? &ops[i + nd + k] : NULL;
        sbs_row(f, d ? &a->lines[d->a] : NULL, d ? a0 + d->a : 0, "del", n ? &b->lines[n->b] : NULL,
                n ? b0 + n->b : 0, "ins");
    }
}

/* Old text a (first line numbered a0) beside new text b (from b0), whole. */
static void sbs_texts(FILE *f, const Page *pg, const Lines *a, int a0, const Lines *b, int b0) {
    LdOp *ops;
    int n = linediff(a, b, &ops);
    sbs_begin(f, pg);
    for (int i = 0; i < n;) {
        if (ops[i].kind == LD_EQ) {
            sbs_row(f, &a->lines[ops[i].a], a0 + ops[i].a, "", &b->lines[ops[i].b], b0 + ops[i].b, "");
            i++;
            continue;
        }
        int j = i;
        while (j < n && ops[j].kind != LD_EQ) j++;
        sbs_change(f, ops, i, j, a, a0, b, b0);
        i = j;
    }
    sbs_end(f);
    free(ops);
}

/* ---- unified hunks ------------------------------------------------------- */

/* Line number shown for index i: through the map if there is one. */
static int shown_line(const int *map, int i) { return i < 0 ? 0 : map ? map[i] : i + 1; }

static void uni_hunk_header(FILE *f, const LdOp *ops, int s, int e, const int *amap, const int *bmap) {
    int a_first = -1, b_first = -1, a_n = 0, b_n = 0;
    for (int k = s; k < e; k++) {
        if (ops[k].a >= 0 && a_n++ == 0) a_first = ops[k].a;
        if (ops[k].b >= 0 && b_n++ == 0) b_first = ops[k].b;
    }
    fprintf(f, "<tr class=\"hunk\"><td colspan=\"3\">@@ -%d,%d +%d,%d @@</td></tr>\n", shown_line(amap, a_first),
            a_n, shown_line(bmap, b_first), b_n);
}

static void uni_line(FILE *f, const LdOp *op, const Lines *a, const Lines *b, const int *amap, const int *bmap) {
    static const char *const cls[] = {"", "del", "ins"}, *const sign[] = {" ", "-", "+"};
    const Line *l = op->kind == LD_INS ? &b->lines[op->b] : &a->lines[op->a];
    fputs("<tr>", f);
    num_cell(f, op->a >= 0 ? shown_line(amap, op->a) : 0);
    num_cell(f, op->b >= 0 ? shown_line(bmap, op->b) : 0);
    fprintf(f, "<td class=\"c %s\">%s", cls[op->kind], sign[op->kind]);
    htmldiff_escape(f, l->s, (size_t)l->len);
    fputs("</td></tr>\n", f);
}

/* The end of the hunk that starts with the change at i: changes closer than
 * 2 * CONTEXT unchanged lines share a hunk. */
static int hunk_end(const LdOp *ops, int n, int i) {
    int last = i;
    for (int k = i; k < n; k++) {
        if (ops[k].kind != LD_EQ) last = k;
        else if (k - last > 2 * CONTEXT) break;
    }
    return last + 1 + CONTEXT < n ? last + 1 + CONTEXT : n;
}

/* a -> b as unified hunks; amap/bmap (may be NULL) give each line's number. */
static void uni_texts(FILE *f, const Lines *a, const Lines *b, const int *amap, const int *bmap) {
    LdOp *ops;
    int n = linediff(a, b, &ops), done = 0;
    fputs("<table class=\"uni\"><colgroup><col style=\"width:3.5em\"><col style=\"width:3.5em\"><col></colgroup>"
          "<tbody>\n", f);
    for (int i = 0; i < n; i++) {
        if (ops[i].kind == LD_EQ) continue;
        int s = i - CONTEXT > done ? i - CONTEXT : done, e = hunk_end(ops, n, i);
        uni_hunk_header(f, ops, s, e, amap, bmap);
        for (int k = s; k < e; k++) uni_line(f, &ops[k], a, b, amap, bmap);
        done = e;
        i = e - 1;
    }
    fputs("</tbody></table>\n", f);
    free(ops);
}

/* ---- sections ------------------------------------------------------------ */

static void badge(FILE *f, const char *what) { fprintf(f, " <span class=\"badge %s\">%s</span>", what, what); }

/* One function's heading and table: both sides, or one when it was added or removed. */
static void write_function(FILE *f, const Page *pg, const FileEntry *e, const FnDiff *d) {
    fprintf(f, "<h%d id=\"", pg->h + 1);
    write_id(f, "fn-", e->path, d->key);
    fputs("\"><code>", f);
    esc(f, d->name);
    fputs("</code>", f);
    badge(f, cfuncs_status_name(d->status));
    fprintf(f, "</h%d>\n", pg->h + 1);
    Lines a = {0}, b = {0};
    if (d->old) lines_split(e->old + d->old->start, d->old->end - d->old->start, &a);
    if (d->new) lines_split(e->new + d->new->start, d->new->end - d->new->start, &b);
    sbs_texts(f, pg, &a, d->old ? d->old->line : 1, &b, d->new ? d->new->line : 1);
    lines_free(&a);
    lines_free(&b);
}

static void write_unchanged_functions(FILE *f, const FileEntry *e) {
    StrList same = {0};
    for (int i = 0; i < e->n_fd; i++)
        if (e->fd[i].status == FN_SAME) strlist_push(&same, e->fd[i].name);
    if (same.n) {
        char *names = strlist_join(&same, ", ");
        fprintf(f, "<p class=\"note\">%d function%s unchanged: ", same.n, same.n == 1 ? "" : "s");
        esc(f, names);
        fputs("</p>\n", f);
        free(names);
    }
    strlist_free(&same);
}

static void write_outside(FILE *f, const Page *pg, const FileEntry *e) {
    fprintf(f, "<h%d>Outside functions <span class=\"note\">(comments, includes, macros, types; "
               "<code>[function f]</code> marks where a function sits)</span></h%d>\n", pg->h + 1, pg->h + 1);
    Lines a, b;
    lines_split(e->old_skel, strlen(e->old_skel), &a);
    lines_split(e->new_skel, strlen(e->new_skel), &b);
    uni_texts(f, &a, &b, e->old_skel_line, e->new_skel_line);
    lines_free(&a);
    lines_free(&b);
}

static void write_changed_c(FILE *f, const Page *pg, const FileEntry *e) {
    for (int i = 0; i < e->n_fd; i++)
        if (e->fd[i].status != FN_SAME) write_function(f, pg, e, &e->fd[i]);
    if (e->outside_changed) write_outside(f, pg, e);
    write_unchanged_functions(f, e);
}

static void write_changed_text(FILE *f, const FileEntry *e) {
    Lines a, b;
    lines_split(e->old, e->old_len, &a);
    lines_split(e->new, e->new_len, &b);
    uni_texts(f, &a, &b, NULL, NULL);
    lines_free(&a);
    lines_free(&b);
}

/* A whole added or removed file, one column. */
static void write_whole(FILE *f, const char *text, size_t len, const char *cls) {
    Lines l;
    lines_split(text, len, &l);
    fputs("<table class=\"file\"><colgroup><col style=\"width:3.5em\"><col></colgroup><tbody>\n", f);
    for (int i = 0; i < l.n; i++) {
        fputs("<tr>", f);
        num_cell(f, i + 1);
        code_cell(f, &l.lines[i], cls, 0, 0);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    lines_free(&l);
}

static const char *status_name(FileStatus s) {
    return s == F_ADDED ? "added" : s == F_REMOVED ? "removed" : s == F_CHANGED ? "changed" : "unchanged";
}

static void write_file_body(FILE *f, const Page *pg, const FileEntry *e) {
    if (e->status == F_ADDED) {
        write_whole(f, e->new, e->new_len, "ins");
    } else if (e->status == F_REMOVED) {
        fputs("<details><summary>the removed file</summary>\n", f);
        write_whole(f, e->old, e->old_len, "del");
        fputs("</details>\n", f);
    } else if (e->is_c && (e->old_fns.n || e->new_fns.n)) {
        write_changed_c(f, pg, e);
    } else {
        write_changed_text(f, e);
    }
}

/* A file's section: under its heading, or folded (a <details> whose summary names it). */
static void write_file_section(FILE *f, const Page *pg, const FileEntry *e, bool fold) {
    fputs(fold ? "<details class=\"file\" id=\"" : "<h2 id=\"", f);
    write_id(f, "file-", e->path, NULL);
    fputs(fold ? "\"><summary><code>" : "\"><code>", f);
    esc(f, e->path);
    fputs("</code>", f);
    badge(f, status_name(e->status));
    fputs(fold ? "</summary>\n" : "</h2>\n", f);
    write_file_body(f, pg, e);
    if (fold) fputs("</details>\n", f);
}

/* ---- summary ------------------------------------------------------------- */

/* "2 functions changed, 1 function added, text outside functions" and links, for a changed C file. */
static void write_fn_counts(FILE *f, const FileEntry *e) {
    int count[4] = {0};
    for (int i = 0; i < e->n_fd; i++) count[e->fd[i].status]++;
    const char *sep = "";
    for (int s = FN_CHANGED; s <= FN_REMOVED; s++) {
        if (!count[s]) continue;
        fprintf(f, "%s%d function%s %s", sep, count[s], count[s] == 1 ? "" : "s", cfuncs_status_name(s));
        sep = ", ";
    }
    if (e->outside_changed) fprintf(f, "%stext outside functions", sep);
    sep = "<br>";
    for (int i = 0; i < e->n_fd; i++) {
        if (e->fd[i].status == FN_SAME) continue;
        fprintf(f, "%s<a href=\"#", sep);
        write_id(f, "fn-", e->path, e->fd[i].key);
        fputs("\"><code>", f);
        esc(f, e->fd[i].name);
        fputs("</code></a>", f);
        sep = " ";
    }
}

static int count_lines(const char *s, size_t len) {
    Lines l;
    lines_split(s, len, &l);
    int n = l.n;
    lines_free(&l);
    return n;
}

static void write_summary_row(FILE *f, const FileEntry *e) {
    fputs("<tr><td><a href=\"#", f);
    write_id(f, "file-", e->path, NULL);
    fputs("\"><code>", f);
    esc(f, e->path);
    fprintf(f, "</code></a></td><td>%s</td><td>", status_name(e->status));
    if (e->status == F_ADDED) fprintf(f, "%d lines", count_lines(e->new, e->new_len));
    else if (e->status == F_REMOVED) fprintf(f, "%d lines", count_lines(e->old, e->old_len));
    else if (e->is_c && (e->old_fns.n || e->new_fns.n)) write_fn_counts(f, e);
    else fputs("text", f);
    fputs("</td></tr>\n", f);
}

static void write_summary(FILE *f, const Page *pg) {
    int count[4] = {0};
    for (int i = 0; i < pg->n_files; i++) count[pg->files[i].status]++;
    fprintf(f, "<h%d id=\"summary\">Summary</h%d>\n<p>%d added, %d removed, %d changed, %d unchanged files.</p>\n",
            pg->h, pg->h, count[F_ADDED], count[F_REMOVED], count[F_CHANGED], count[F_SAME]);
    fputs("<table class=\"summary\"><thead><tr><th>file</th><th>status</th><th>what</th></tr></thead><tbody>\n", f);
    for (int i = 0; i < pg->n_files; i++)
        if (pg->files[i].status != F_SAME) write_summary_row(f, &pg->files[i]);
    fputs("</tbody></table>\n", f);
    if (!count[F_SAME]) return;
    fputs("<p class=\"note\">Unchanged:", f);
    for (int i = 0; i < pg->n_files; i++) {
        if (pg->files[i].status != F_SAME) continue;
        fputs(" <code>", f);
        esc(f, pg->files[i].path);
        fputs("</code>", f);
    }
    fputs("</p>\n", f);
}

/* The manifest of `to` and, when `from` is the chapter before it, the check's verdict. */
static void write_manifest(FILE *f, const Page *pg, const char *chapters_dir, bool verdict) {
    char *path = chapfs_printf("%s/%s/MANIFEST", chapters_dir, pg->to);
    char *text = chapfs_read(path, NULL);
    free(path);
    fprintf(f, "<h%d id=\"manifest\">Manifest of ", pg->h);
    esc(f, pg->to);
    fprintf(f, "</h%d>\n", pg->h);
    if (!text) {
        fputs("<p class=\"bad\">No MANIFEST.</p>\n", f);
        return;
    }
    fputs("<pre>", f);
    esc(f, text);
    fputs("</pre>\n", f);
    free(text);
    StrList chapters = {0}, problems = {0};
    chapfs_list_chapters(chapters_dir, &chapters);
    const char *prev = chapfs_previous(&chapters, pg->to);
    if (verdict && prev && strcmp(prev, pg->from) == 0) {
        manifest_check_chapter(chapters_dir, pg->to, &problems, NULL);
        fprintf(f, "<p class=\"%s\">Manifest check: %s</p>\n", problems.n ? "bad" : "ok",
                problems.n ? "problems" : "ok, the differences are exactly the declared ones");
        if (problems.n) fputs("<ul>\n", f);
        for (int i = 0; i < problems.n; i++) {
            fputs("<li>", f);
            esc(f, problems.items[i]);
            fputs("</li>\n", f);
        }
        if (problems.n) fputs("</ul>\n", f);
    }
    strlist_free(&chapters);
    strlist_free(&problems);
}

static void write_page(FILE *f, const Page *pg, const char *chapters_dir, bool fragment, bool verdict) {
    if (fragment) {
        fprintf(f, "<div class=\"chapdiff\">\n<style>\n%s</style>\n", STYLE_DIFF);
    } else {
        fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
        esc(f, pg->from);
        fputs(" &#8594; ", f);
        esc(f, pg->to);
        fprintf(f, "</title>\n<style>\n%s%s</style>\n</head>\n<body>\n<h1>Chapter ", STYLE_PAGE, STYLE_DIFF);
        esc(f, pg->from);
        fputs(" &#8594; ", f);
        esc(f, pg->to);
        fputs("</h1>\n", f);
    }
    fputs("<p class=\"note\">What the chapter adds and changes. Changed functions are shown whole, old "
          "on the left, new on the right.</p>\n", f);
    write_summary(f, pg);
    write_manifest(f, pg, chapters_dir, verdict);
    for (int i = 0; i < pg->n_files; i++)
        if (pg->files[i].status != F_SAME) write_file_section(f, pg, &pg->files[i], fragment);
    fputs(fragment ? "</div>\n" : "</body>\n</html>\n", f);
}

static int fail(char *err, size_t err_len, const char *fmt, const char *a, const char *b) {
    snprintf(err, err_len, fmt, a, b);
    return -1;
}

int htmldiff_write(const char *chapters_dir, const char *from, const char *to, const char *out_path, char *err,
                   size_t err_len) {
    return htmldiff_write_as(chapters_dir, from, to, out_path, false, true, err, err_len);
}

int htmldiff_write_as(const char *chapters_dir, const char *from, const char *to, const char *out_path, bool fragment,
                      bool verdict, char *err, size_t err_len) {
    char *old_dir = chapfs_printf("%s/%s", chapters_dir, from), *new_dir = chapfs_printf("%s/%s", chapters_dir, to);
    int rc = 0;
    if (!chapfs_is_dir(old_dir) || !chapfs_is_dir(new_dir)) {
        rc = fail(err, err_len, "no chapter directory %s%s", chapfs_is_dir(old_dir) ? "" : old_dir,
                  chapfs_is_dir(old_dir) ? new_dir : "");
    } else {
        FILE *f = fopen(out_path, "w");
        if (!f) {
            rc = fail(err, err_len, "cannot write %s%s", out_path, "");
        } else {
            Page pg = {.from = from, .to = to, .h = fragment ? 3 : 2};
            load_page(&pg, old_dir, new_dir);
            write_page(f, &pg, chapters_dir, fragment, verdict);
            for (int i = 0; i < pg.n_files; i++) free_entry(&pg.files[i]);
            free(pg.files);
            if (fclose(f) != 0) rc = fail(err, err_len, "cannot write %s%s", out_path, "");
        }
    }
    free(old_dir);
    free(new_dir);
    return rc;
}
