/* chat.c: see chat.h. Follows Qwen3's Jinja template step by step; the
 * comments quote the template expressions being reproduced. */
#include "chat.h"

#include <string.h>

#include "util.h"

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

static void buf_span(Buf *b, Span s) { buf_append(b, s.p, s.n); }

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
static void render_tool_calls(Buf *b, const ChatMessage *m, Span answer) {
    for (int i = 0; i < m->n_tool_calls; i++) {
        const ChatToolCall *c = &m->tool_calls[i];
        if (i > 0 || answer.n > 0) buf_puts(b, "\n");
        buf_puts(b, "<tool_call>\n{\"name\": \"");
        buf_puts(b, c->name ? c->name : "");
        buf_puts(b, "\", \"arguments\": ");
        buf_puts(b, c->arguments ? c->arguments : "");
        buf_puts(b, "}\n</tool_call>");
    }
}

static void render_assistant(Buf *b, const ChatMessage *m, bool after_last_query, bool is_last, bool left_open) {
    Span reasoning, answer;
    split_reasoning(m, &reasoning, &answer);
    buf_puts(b, "<|im_start|>assistant\n");
    /* "if loop.index0 > ns.last_query_index and (loop.last or reasoning_content)" */
    if (after_last_query && (is_last || reasoning.n > 0)) {
        buf_puts(b, "<think>\n");
        buf_span(b, rstrip_newlines(lstrip_newlines(reasoning)));
        buf_puts(b, "\n</think>\n\n");
        buf_span(b, lstrip_newlines(answer));
    } else {
        buf_span(b, answer);
    }
    render_tool_calls(b, m, answer);
    if (!left_open) buf_puts(b, "<|im_end|>\n");
}

static void render_tool(Buf *b, const ChatMessage *msgs, int n, int i) {
    if (i == 0 || !str_eq(msgs[i - 1].role, "tool")) buf_puts(b, "<|im_start|>user");
    buf_puts(b, "\n<tool_response>\n");
    buf_puts(b, content_of(&msgs[i]));
    buf_puts(b, "\n</tool_response>");
    if (i == n - 1 || !str_eq(msgs[i + 1].role, "tool")) buf_puts(b, "<|im_end|>\n");
}

static void render_turn(Buf *b, const char *role, const char *content) {
    buf_printf(b, "<|im_start|>%s\n", role);
    buf_puts(b, content);
    buf_puts(b, "<|im_end|>\n");
}

/* The system turn: the first message if it is a system one, and the tools. */
static void render_system(Buf *b, const ChatMessage *msgs, int n, const ChatOptions *opt) {
    bool has_system = n > 0 && str_eq(msgs[0].role, "system");
    if (opt->n_tools <= 0) {
        if (has_system) render_turn(b, "system", content_of(&msgs[0]));
        return;
    }
    buf_puts(b, "<|im_start|>system\n");
    if (has_system) buf_printf(b, "%s\n\n", content_of(&msgs[0]));
    buf_puts(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (int i = 0; i < opt->n_tools; i++) buf_printf(b, "\n%s", opt->tools[i] ? opt->tools[i] : "");
    buf_puts(b, "\n</tools>\n\nFor each function call, return a json object with function name and "
                "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
}

char *chat_render_with(const ChatMessage *msgs, int n, const ChatOptions *opt) {
    Buf b = {0};
    buf_append(&b, "", 0);
    render_system(&b, msgs, n, opt);
    int last_query = last_query_index(msgs, n);
    for (int i = 0; i < n; i++) {
        const ChatMessage *m = &msgs[i];
        if (str_eq(m->role, "user") || (str_eq(m->role, "system") && i > 0))
            render_turn(&b, m->role, content_of(m));
        else if (str_eq(m->role, "assistant"))
            render_assistant(&b, m, i > last_query, i == n - 1, opt->continue_final && i == n - 1);
        else if (str_eq(m->role, "tool"))
            render_tool(&b, msgs, n, i);
    }
    if (opt->add_generation_prompt) {
        buf_puts(&b, "<|im_start|>assistant\n");
        if (!opt->enable_thinking) buf_puts(&b, "<think>\n\n</think>\n\n");
    }
    return b.data;
}

char *chat_render(const ChatMessage *msgs, int n, bool add_generation_prompt, bool enable_thinking) {
    ChatOptions opt = {.add_generation_prompt = add_generation_prompt, .enable_thinking = enable_thinking};
    return chat_render_with(msgs, n, &opt);
}
