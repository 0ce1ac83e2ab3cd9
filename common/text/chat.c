/* chat.c: see chat.h. Follows Qwen3's Jinja template step by step; the
 * comments quote the template expressions being reproduced. */
#include "chat.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#define IM_START "<|im_start|>"
#define IM_END "<|im_end|>"

static bool str_eq(const char *a, const char *b) { return a && strcmp(a, b) == 0; }

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The last occurrence of needle in s, or NULL. */
static const char *find_last(const char *s, const char *needle) {
    const char *last = NULL;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) last = p;
    return last;
}

/* A span of text: [p, p + n). */
typedef struct {
    const char *p;
    size_t n;
} Span;

static Span span_of(const char *s) { return (Span){s, strlen(s)}; }

static Span lstrip_newlines(Span s) {
    while (s.n > 0 && s.p[0] == '\n') s.p++, s.n--;
    return s;
}

static Span rstrip_newlines(Span s) {
    while (s.n > 0 && s.p[s.n - 1] == '\n') s.n--;
    return s;
}

/* A rendering: its text, and where in it the template itself wrote a
 * control marker (IM_START or IM_END). chat_encode makes control tokens of
 * those alone; the same characters inside a message stay text. */
typedef struct {
    Buf text;
    size_t *marks;   /* [n_marks] offsets in text of the template's markers, in order */
    int n_marks, cap_marks;
} Out;

static void put(Out *o, const char *s) { buf_puts(&o->text, s); }
static void put_span(Out *o, Span s) { buf_append(&o->text, s.p, s.n); }

static void put_marker(Out *o, const char *marker) {
    if (o->n_marks == o->cap_marks) {
        o->cap_marks = o->cap_marks ? 2 * o->cap_marks : 16;
        o->marks = xrealloc(o->marks, sizeof *o->marks * (size_t)o->cap_marks);
    }
    o->marks[o->n_marks++] = o->text.len;
    put(o, marker);
}

const char *chat_strip_thinking(const char *reply) {
    const char *end = find_last(reply, "</think>");
    if (!end) return reply;
    return lstrip_newlines(span_of(end + strlen("</think>"))).p;
}

/* The message's content, "" when absent ("if message.content is string ... else ''"). */
static const char *content_of(const ChatMessage *m) { return m->content ? m->content : ""; }

/* A user message counts as the user's query unless it only carries tool output:
 * "not(content.startswith('<tool_response>') and content.endswith('</tool_response>'))". */
static bool is_query(const ChatMessage *m) {
    return str_eq(m->role, "user") && m->content &&
           !(starts_with(m->content, "<tool_response>") && ends_with(m->content, "</tool_response>"));
}

/* ns.last_query_index: the last user query, or the last message if none. */
static int last_query_index(const ChatMessage *msgs, int n) {
    for (int i = n - 1; i >= 0; i--)
        if (is_query(&msgs[i])) return i;
    return n - 1;
}

/* Splits an assistant message into reasoning and answer. Given reasoning_content
 * is used as it is, with the content untouched; otherwise
 *   reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
 *   content   = content.split('</think>')[-1].lstrip('\n')        (when '</think>' in content) */
static void split_reasoning(const ChatMessage *m, Span *reasoning, Span *answer) {
    const char *content = content_of(m);
    *answer = span_of(content);
    *reasoning = span_of(m->reasoning_content ? m->reasoning_content : "");
    const char *first_end = strstr(content, "</think>");
    if (m->reasoning_content || !first_end) return;
    *answer = lstrip_newlines(span_of(find_last(content, "</think>") + strlen("</think>")));
    Span before = rstrip_newlines((Span){content, (size_t)(first_end - content)});
    const char *end = before.p + before.n, *start = before.p;
    for (const char *p = strstr(before.p, "<think>"); p && p + strlen("<think>") <= end;
         p = strstr(p + 1, "<think>"))
        start = p + strlen("<think>");
    *reasoning = lstrip_newlines((Span){start, (size_t)(end - start)});
}

/* "{%- if (loop.first and content) or (not loop.first) %}\n" before each call. */
static void render_tool_calls(Out *o, const ChatMessage *m, Span answer) {
    for (int i = 0; i < m->n_tool_calls; i++) {
        const ChatToolCall *c = &m->tool_calls[i];
        if (i > 0 || answer.n > 0) put(o, "\n");
        put(o, "<tool_call>\n{\"name\": \"");
        put(o, c->name ? c->name : "");
        put(o, "\", \"arguments\": ");
        put(o, c->arguments ? c->arguments : "");
        put(o, "}\n</tool_call>");
    }
}

/* "<|im_start|>" role "\n" */
static void turn_start(Out *o, const char *role) {
    put_marker(o, IM_START);
    put(o, role);
}

/* "<|im_end|>\n" */
static void turn_end(Out *o) {
    put_marker(o, IM_END);
    put(o, "\n");
}

static void render_assistant(Out *o, const ChatMessage *m, bool after_last_query, bool is_last, bool left_open) {
    Span reasoning, answer;
    split_reasoning(m, &reasoning, &answer);
    turn_start(o, "assistant\n");
    /* "if loop.index0 > ns.last_query_index and (loop.last or reasoning_content)" */
    if (after_last_query && (is_last || reasoning.n > 0)) {
        put(o, "<think>\n");
        put_span(o, rstrip_newlines(lstrip_newlines(reasoning)));
        put(o, "\n</think>\n\n");
        put_span(o, lstrip_newlines(answer));
    } else {
        put_span(o, answer);
    }
    render_tool_calls(o, m, answer);
    if (!left_open) turn_end(o);
}

static void render_tool(Out *o, const ChatMessage *msgs, int n, int i) {
    if (i == 0 || !str_eq(msgs[i - 1].role, "tool")) turn_start(o, "user");
    put(o, "\n<tool_response>\n");
    put(o, content_of(&msgs[i]));
    put(o, "\n</tool_response>");
    if (i == n - 1 || !str_eq(msgs[i + 1].role, "tool")) turn_end(o);
}

static void render_turn(Out *o, const char *role, const char *content) {
    turn_start(o, role);
    put(o, "\n");
    put(o, content);
    turn_end(o);
}

/* The system turn: the first message if it is a system one, and the tools. */
static void render_system(Out *o, const ChatMessage *msgs, int n, const ChatOptions *opt) {
    bool has_system = n > 0 && str_eq(msgs[0].role, "system");
    if (opt->n_tools <= 0) {
        if (has_system) render_turn(o, "system", content_of(&msgs[0]));
        return;
    }
    turn_start(o, "system\n");
    if (has_system) buf_printf(&o->text, "%s\n\n", content_of(&msgs[0]));
    put(o, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (int i = 0; i < opt->n_tools; i++) buf_printf(&o->text, "\n%s", opt->tools[i] ? opt->tools[i] : "");
    put(o, "\n</tools>\n\nFor each function call, return a json object with function name and "
           "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
           "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    turn_end(o);
}

static Out render(const ChatMessage *msgs, int n, const ChatOptions *opt) {
    Out o = {0};
    buf_append(&o.text, "", 0);
    render_system(&o, msgs, n, opt);
    int last_query = last_query_index(msgs, n);
    for (int i = 0; i < n; i++) {
        const ChatMessage *m = &msgs[i];
        if (str_eq(m->role, "user") || (str_eq(m->role, "system") && i > 0))
            render_turn(&o, m->role, content_of(m));
        else if (str_eq(m->role, "assistant"))
            render_assistant(&o, m, i > last_query, i == n - 1, opt->continue_final && i == n - 1);
        else if (str_eq(m->role, "tool"))
            render_tool(&o, msgs, n, i);
    }
    if (opt->add_generation_prompt) {
        turn_start(&o, "assistant\n");
        if (!opt->enable_thinking) put(&o, "<think>\n\n</think>\n\n");
    }
    return o;
}

char *chat_render_with(const ChatMessage *msgs, int n, const ChatOptions *opt) {
    Out o = render(msgs, n, opt);
    free(o.marks);
    return o.text.data;
}

char *chat_continued(const ChatMessage *msgs, int n, const ChatOptions *opt) {
    static const char open_turn[] = IM_START "assistant\n";
    Out o = render(msgs, n, opt);
    size_t at = o.text.len;
    /* The left-open turn begins at the last marker the template wrote. */
    if (opt->continue_final && !opt->add_generation_prompt && o.n_marks > 0 &&
        strncmp(o.text.data + o.marks[o.n_marks - 1], open_turn, strlen(open_turn)) == 0)
        at = o.marks[o.n_marks - 1] + strlen(open_turn);
    char *rest = xstrdup(o.text.data + at);
    free(o.marks);
    buf_free(&o.text);
    return rest;
}

char *chat_render(const ChatMessage *msgs, int n, bool add_generation_prompt, bool enable_thinking) {
    ChatOptions opt = {.add_generation_prompt = add_generation_prompt, .enable_thinking = enable_thinking};
    return chat_render_with(msgs, n, &opt);
}

/* Appends the tokens of text[0..len) to ids (int32_t each): special-token
 * parsing off, so a control token's text is split into ordinary tokens. */
static void encode_text(const Tokenizer *tok, const char *text, size_t len, Buf *ids) {
    int32_t *t = NULL;
    int n = 0;
    tokenizer_encode(tok, text, len, false, &t, &n, NULL); /* cannot fail */
    buf_append(ids, t, sizeof *t * (size_t)n);
    free(t);
}

/* A marker the template wrote: its control token, or, in a vocabulary
 * without one, the marker's text as ordinary tokens. */
static void encode_marker(const Tokenizer *tok, const char *marker, Buf *ids) {
    int32_t id = tokenizer_find(tok, marker);
    if (id >= 0) buf_append(ids, &id, sizeof id);
    else encode_text(tok, marker, strlen(marker), ids);
}

int chat_encode(const Tokenizer *tok, const ChatMessage *msgs, int n, const ChatOptions *opt, int32_t **ids,
                int *n_ids, char *err) {
    Out o = render(msgs, n, opt);
    int rc = 0;
    if (opt->parse_special_in_messages) {
        rc = tokenizer_encode(tok, o.text.data, o.text.len, true, ids, n_ids, err);
    } else {
        Buf out = {0};
        size_t at = 0; /* where the text after the last marker begins */
        for (int i = 0; i < o.n_marks; i++) {
            const char *marker = strncmp(o.text.data + o.marks[i], IM_START, strlen(IM_START)) == 0 ? IM_START : IM_END;
            encode_text(tok, o.text.data + at, o.marks[i] - at, &out);
            encode_marker(tok, marker, &out);
            at = o.marks[i] + strlen(marker);
        }
        encode_text(tok, o.text.data + at, o.text.len - at, &out);
        *n_ids = (int)(out.len / sizeof(int32_t));
        *ids = out.data ? (int32_t *)out.data : xmalloc(sizeof(int32_t));
    }
    free(o.marks);
    buf_free(&o.text);
    return rc;
}
