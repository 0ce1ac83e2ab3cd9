/* test_tools.c: tool calls and reasoning through the whole API, over real
 * sockets and through the real npm clients (openai, LangChain), with the
 * model replaced by a script. The default model writes stories and never
 * calls a tool by itself, so the reply text a Qwen3 model writes in a tool
 * loop is scripted here; everything from the chat template to the JSON the
 * client reads is the server's real code (common/serve, chat_reply). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "harness.h"
#include "server.h"
#include "servers.h"
#include "tokenizer.h"

/* ---- the scripted engine --------------------------------------------------------------------- */

typedef struct {
    Engine e;
    Tokenizer *tok;
    int32_t eos;
} ScriptEngine;

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

#define CALL "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}"

/* What a Qwen3 model would write after this prompt in a tool loop. */
static const char *script_reply(const char *prompt) {
    if (ends_with(prompt, "\"arguments\": ")) return "{\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>";
    if (ends_with(prompt, "<tool_call>\n")) return CALL "\n</tool_call>";
    if (strstr(prompt, "<tool_response>")) return "<think>\nThe tool says 21 degrees.\n</think>\n\nIt is 21 °C in Paris.";
    if (strstr(prompt, "two cities")) return "Checking both.\n<tool_call>\n" CALL "\n</tool_call>\n<tool_call>\n"
                                             "{\"name\": \"get_time\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
    if (strstr(prompt, "break it")) return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>";
    if (strstr(prompt, "# Tools")) return "<think>\nThe user wants the weather: I call the tool.\n</think>\n\n<tool_call>\n" CALL "\n</tool_call>";
    return "<think>\nA greeting.\n</think>\n\nHello there!";
}

/* Runs r at once on the caller's thread: a script takes no time. */
static int script_submit(Engine *e, GenRequest *r, char *err) {
    (void)err;
    ScriptEngine *s = (ScriptEngine *)e;
    const GenInput *in = gen_input(r);
    char *prompt = tokenizer_decode(s->tok, in->prompt, in->n_prompt, true, NULL);
    const char *reply = script_reply(prompt);
    int32_t *ids = NULL;
    int n = 0;
    char terr[ERR_MAX];
    tokenizer_encode(s->tok, reply, strlen(reply), true, &ids, &n, terr);
    gen_begin(r);
    gen_prefill_done(r, 0);
    bool done = false;
    for (int i = 0; i < n && !done; i++) done = gen_push_token(r, ids[i], NULL);
    if (!done) gen_push_token(r, s->eos, NULL);
    gen_finish(r);
    free(ids);
    free(prompt);
    return 0;
}

static void script_stats(Engine *e, EngineStats *st) {
    (void)e;
    memset(st, 0, sizeof *st);
}
static int script_debug(Engine *e, const char *view, Buf *out) {
    (void)e, (void)view, (void)out;
    return -1;
}
static void script_noop(Engine *e) { (void)e; }

typedef struct {
    ScriptEngine engine;
    Server *server;
    int port;
} Scripted;

/* A server on a free port whose "model" is the script; cors and reasoning_in_content as asked. */
static bool scripted_start(Scripted *t, const char *cors, bool reasoning_in_content) {
    memset(t, 0, sizeof *t);
    char err[ERR_MAX];
    GgufFile g;
    if (gguf_open(&g, default_model_path(), err) != 0) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    t->engine.tok = tokenizer_load(&g, err);
    gguf_close(&g);
    if (!t->engine.tok) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return false;
    }
    t->engine.eos = tokenizer_find(t->engine.tok, "<|im_end|>");
    t->engine.e = (Engine){.name = "script", .submit = script_submit, .stats = script_stats, .debug_json = script_debug,
                           .shutdown = script_noop, .destroy = script_noop};
    ServerConfig c;
    server_config_default(&c);
    c.bind = "127.0.0.1:0";
    c.quiet = true;
    c.model_name = "scripted";
    c.tok = t->engine.tok;
    c.vocab_size = tokenizer_vocab_size(t->engine.tok);
    c.ctx = 4096;
    c.cors_origin = cors;
    c.reasoning_in_content = reasoning_in_content;
    if (!(t->server = server_start(&c, &t->engine.e, err))) {
        test_fail(__FILE__, __LINE__, "server_start: %s", err);
        tokenizer_free(t->engine.tok);
        return false;
    }
    t->port = server_port(t->server);
    return true;
}

static void scripted_stop(Scripted *t) {
    server_stop(t->server);
    tokenizer_free(t->engine.tok);
}

/* ---- requests ------------------------------------------------------------------------------------ */

#define TOOLS                                                                                                     \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather in a city\"," \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":[\"celsius\"," \
    "\"fahrenheit\"]}},\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\","    \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}]"

static JsonValue *post_json(int port, const char *path, const char *json, int want_status) {
    HttpReply r;
    if (!http_post(port, path, json, &r)) {
        test_fail(__FILE__, __LINE__, "no answer to POST %s", path);
        return NULL;
    }
    JsonValue *v = http_reply_json(&r);
    CHECK_MSG(r.status == want_status && v, "POST %s %s: %d (want %d) %s", path, json, r.status, want_status, r.body);
    http_reply_free(&r);
    return v;
}

static void check_weather_call(const JsonValue *call, int index) {
    CHECK_STR(json_string_at(call, "type", NULL), "function");
    CHECK_STR(json_string_at(call, "function", "name", NULL), "get_weather");
    CHECK_STR(json_string_at(call, "function", "arguments", NULL), "{\"city\":\"Paris\",\"unit\":\"celsius\"}");
    const char *id = json_string_at(call, "id", NULL);
    CHECK_MSG(id && strncmp(id, "call_", 5) == 0, "tool call id '%s'", id ? id : "(none)");
    (void)index;
}

TEST(server_tools_whole_replies) {
    Scripted t;
    if (!scripted_start(&t, NULL, false)) return;
    /* auto: the model calls the tool; its reasoning is apart, the content null */
    JsonValue *v = post_json(t.port, "/v1/chat/completions",
                             "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}]," TOOLS "}", 200);
    if (v) {
        const JsonValue *msg = json_get(json_get(v, "choices")->items, "message");
        CHECK_STR(json_string_at(v, "choices", "0", "finish_reason", NULL), "tool_calls");
        CHECK(json_get(msg, "content") && json_get(msg, "content")->type == JSON_NULL);
        CHECK_STR(json_string_at(msg, "reasoning_content", NULL), "The user wants the weather: I call the tool.");
        const JsonValue *calls = json_get(msg, "tool_calls");
        CHECK(calls && calls->n_items == 1);
        if (calls && calls->n_items == 1) check_weather_call(&calls->items[0], 0);
    }
    json_free(v);
    /* two calls in one reply, after some text */
    v = post_json(t.port, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"two cities please\"}]," TOOLS "}", 200);
    if (v) {
        const JsonValue *msg = json_get(json_get(v, "choices")->items, "message");
        CHECK_STR(json_string_at(msg, "content", NULL), "Checking both.");
        const JsonValue *calls = json_get(msg, "tool_calls");
        CHECK(calls && calls->n_items == 2);
        if (calls && calls->n_items == 2) {
            check_weather_call(&calls->items[0], 0);
            CHECK_STR(json_string_at(&calls->items[1], "function", "name", NULL), "get_time");
            CHECK_STR(json_string_at(&calls->items[1], "function", "arguments", NULL), "{\"city\":\"Oslo\"}");
            CHECK(strcmp(json_string_at(&calls->items[0], "id", NULL), json_string_at(&calls->items[1], "id", NULL)) != 0);
        }
    }
    json_free(v);
    /* malformed JSON from the model: the text, as content, with 200 */
    v = post_json(t.port, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"break it\"}]," TOOLS "}", 200);
    if (v) {
        const char *content = json_string_at(v, "choices", "0", "message", "content", NULL);
        CHECK_MSG(content && strstr(content, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }"), "content: %s",
                  content ? content : "(none)");
        CHECK(!json_get(json_get(json_get(v, "choices")->items, "message"), "tool_calls"));
        CHECK_STR(json_string_at(v, "choices", "0", "finish_reason", NULL), "stop");
    }
    json_free(v);
    /* the whole loop: the call and its result in the history give the final answer */
    v = post_json(t.port, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":null,"
                  "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                  "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\","
                  "\"content\":\"{\\\"temp\\\":21}\"}]," TOOLS "}", 200);
    if (v) {
        CHECK_STR(json_string_at(v, "choices", "0", "message", "content", NULL), "It is 21 °C in Paris.");
        CHECK_STR(json_string_at(v, "choices", "0", "message", "reasoning_content", NULL), "The tool says 21 degrees.");
        CHECK_STR(json_string_at(v, "choices", "0", "finish_reason", NULL), "stop");
    }
    json_free(v);
    /* the history as the template renders it */
    v = post_json(t.port, "/apply-template",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":null,"
                  "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_time\","
                  "\"arguments\":{\"city\":\"Oslo\"}}}]},{\"role\":\"tool\",\"content\":\"12:00\"}]," TOOLS "}", 200);
    if (v) {
        const char *p = json_string_at(v, "prompt", NULL);
        CHECK_MSG(p && strstr(p, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
                                 "\"The weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
                                 "{\"type\": \"string\"}, \"unit\": {\"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": "
                                 "[\"city\"]}}}\n{\"type\": \"function\""),
                  "tools in the prompt: %s", p ? p : "(none)");
        CHECK_MSG(p && strstr(p, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_time\", "
                                 "\"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
                                 "<tool_response>\n12:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n"),
                  "the call and its result in the prompt: %s", p ? p : "(none)");
    }
    json_free(v);
    /* tool_choice none: the same prompt as without tools */
    JsonValue *with = post_json(t.port, "/apply-template",
                                "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]," TOOLS ",\"tool_choice\":\"none\"}", 200);
    JsonValue *without = post_json(t.port, "/apply-template", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", 200);
    if (with && without) CHECK_STR(json_string_at(with, "prompt", NULL), json_string_at(without, "prompt", NULL));
    json_free(with);
    json_free(without);
    scripted_stop(&t);
}

/* tool_choice required and a named function: the reply is made to start as a
 * call (prefilled; the rest is the constrained sampler's, which a script does
 * not go through: test_structured.c tests it on a model), so even a reply
 * that would have been text is a call. */
TEST(server_tools_choice_forces_a_call) {
    Scripted t;
    if (!scripted_start(&t, NULL, false)) return;
    static const char *const choices[] = {"\"required\"", "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}"};
    for (int i = 0; i < 2; i++) {
        char body[2048];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]," TOOLS ",\"tool_choice\":%s}",
                 choices[i]);
        JsonValue *v = post_json(t.port, "/v1/chat/completions", body, 200);
        const JsonValue *calls = v ? json_get(json_get(json_get(v, "choices")->items, "message"), "tool_calls") : NULL;
        CHECK_MSG(calls && calls->n_items == 1, "tool_choice %s: no call", choices[i]);
        if (calls && calls->n_items == 1) check_weather_call(&calls->items[0], 0);
        json_free(v);
    }
    scripted_stop(&t);
}

/* Streaming: reasoning as delta.reasoning_content, each call as two
 * delta.tool_calls chunks (index, id, type and name; then the arguments). */
TEST(server_tools_streamed) {
    Scripted t;
    if (!scripted_start(&t, NULL, false)) return;
    HttpReply r;
    CHECK(http_post(t.port, "/v1/chat/completions",
                    "{\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"two cities, and Weather in Paris?\"}]," TOOLS "}",
                    &r));
    Buf reasoning = {0}, content = {0}, args[2] = {{0}};
    char names[2][32] = {"", ""}, ids[2][64] = {"", ""}, finish[32] = "";
    for (char *line = r.body ? strtok(r.body, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7) != 0) continue;
        char err[ERR_MAX];
        JsonValue *c = json_parse(line + 6, strlen(line + 6), err);
        if (!c) continue;
        const JsonValue *delta = json_get(json_get(c, "choices")->items, "delta");
        const char *s;
        if ((s = json_string_at(delta, "reasoning_content", NULL))) buf_puts(&reasoning, s);
        if ((s = json_string_at(delta, "content", NULL))) buf_puts(&content, s);
        if ((s = json_string_at(c, "choices", "0", "finish_reason", NULL))) snprintf(finish, sizeof finish, "%s", s);
        const JsonValue *calls = json_get(delta, "tool_calls");
        for (size_t k = 0; calls && k < calls->n_items; k++) {
            int i = (int)json_number_at(&calls->items[k], "index", NULL);
            if (i < 0 || i > 1) continue;
            if ((s = json_string_at(&calls->items[k], "id", NULL))) snprintf(ids[i], sizeof ids[i], "%s", s);
            if ((s = json_string_at(&calls->items[k], "function", "name", NULL))) snprintf(names[i], sizeof names[i], "%s", s);
            if ((s = json_string_at(&calls->items[k], "function", "arguments", NULL))) buf_puts(&args[i], s);
        }
        json_free(c);
    }
    CHECK_STR(content.data ? content.data : "", "Checking both.");
    CHECK_STR(names[0], "get_weather");
    CHECK_STR(names[1], "get_time");
    CHECK(strncmp(ids[0], "call_", 5) == 0 && strcmp(ids[0], ids[1]) != 0);
    CHECK_STR(args[0].data ? args[0].data : "", "{\"city\":\"Paris\",\"unit\":\"celsius\"}");
    CHECK_STR(args[1].data ? args[1].data : "", "{\"city\":\"Oslo\"}");
    CHECK_STR(finish, "tool_calls");
    CHECK(reasoning.len == 0);
    http_reply_free(&r);
    buf_free(&reasoning);
    buf_free(&content);
    buf_free(&args[0]);
    buf_free(&args[1]);
    scripted_stop(&t);
}

/* --reasoning-format none keeps the think block in content; the default splits it off. */
TEST(server_reasoning_format) {
    for (int none = 0; none <= 1; none++) {
        Scripted t;
        if (!scripted_start(&t, NULL, none)) return;
        JsonValue *v = post_json(t.port, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", 200);
        const char *content = v ? json_string_at(v, "choices", "0", "message", "content", NULL) : NULL;
        const char *reasoning = v ? json_string_at(v, "choices", "0", "message", "reasoning_content", NULL) : NULL;
        CHECK_STR(content ? content : "", none ? "<think>\nA greeting.\n</think>\n\nHello there!" : "Hello there!");
        if (none) CHECK(reasoning == NULL);
        else CHECK_STR(reasoning ? reasoning : "", "A greeting.");
        json_free(v);
        Buf text = {0};
        char finish[32];
        HttpReply r;
        CHECK(http_post(t.port, "/v1/chat/completions",
                        "{\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r));
        char err[ERR_MAX];
        CHECK(sse_collect(r.body, &text, finish, sizeof finish, err));
        CHECK_STR(text.data ? text.data : "", none ? "<think>\nA greeting.\n</think>\n\nHello there!" : "Hello there!");
        Buf streamed = {0};
        for (char *line = r.body ? strtok(r.body, "\n") : NULL; line; line = strtok(NULL, "\n")) {
            JsonValue *c = strncmp(line, "data: {", 7) == 0 ? json_parse(line + 6, strlen(line + 6), err) : NULL;
            const char *piece = c ? json_string_at(c, "choices", "0", "delta", "reasoning_content", NULL) : NULL;
            if (piece) buf_puts(&streamed, piece);
            json_free(c);
        }
        CHECK_STR(streamed.data ? streamed.data : "", none ? "" : "A greeting.");
        buf_free(&streamed);
        http_reply_free(&r);
        buf_free(&text);
        scripted_stop(&t);
    }
}

/* Bad tools and tool choices: 400 naming the field. */
TEST(server_tools_bad_requests) {
    Scripted t;
    if (!scripted_start(&t, NULL, false)) return;
    static const struct { const char *extra, *param; } cases[] = {
        {"\"tools\":\"garbage\",\"tool_choice\":\"required\"", "tools"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{}}]", "tools[0].function.name"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"has space\"}}]", "tools[0].function.name"},
        {"\"tools\":[{\"type\":\"function\"}]", "tools[0].function"},
        {"\"tools\":[{\"type\":\"retrieval\",\"function\":{\"name\":\"f\"}}]", "tools[0]"},
        {"\"tools\":[3]", "tools[0]"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":\"x\"}}]", "tools[0].function.parameters"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
         "tools[1].function.name"},
        {TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}", "tool_choice"},
        {TOOLS ",\"tool_choice\":\"sometimes\"", "tool_choice"},
        {TOOLS ",\"tool_choice\":3", "tool_choice"},
        {"\"tool_choice\":\"required\"", "tool_choice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char body[2048];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],%s}", cases[i].extra);
        JsonValue *v = post_json(t.port, "/v1/chat/completions", body, 400);
        const char *param = v ? json_string_at(v, "error", "param", NULL) : NULL;
        CHECK_MSG(param && strcmp(param, cases[i].param) == 0, "%s: param %s, want %s", cases[i].extra, param ? param : "(none)",
                  cases[i].param);
        json_free(v);
    }
    JsonValue *v = post_json(t.port, "/v1/chat/completions",
                             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]}",
                             400);
    CHECK_STR(v ? json_string_at(v, "error", "param", NULL) : "", "messages[1].tool_calls[0]");
    json_free(v);
    scripted_stop(&t);
}

/* --cors: the header on answers (streams too) and preflights answered; without it, neither. */
TEST(server_cors) {
    Scripted t;
    if (!scripted_start(&t, "https://app.example", false)) return;
    const char *preflight = "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
                            "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type\r\n"
                            "Connection: close\r\n\r\n";
    HttpReply r;
    char value[128] = "";
    CHECK(http_exchange(t.port, preflight, strlen(preflight), &r, 5000));
    CHECK_EQ_INT(r.status, 200);
    CHECK(http_reply_header(&r, "Access-Control-Allow-Origin", value, sizeof value) && strcmp(value, "https://app.example") == 0);
    CHECK(http_reply_header(&r, "Access-Control-Allow-Headers", value, sizeof value) &&
          strcmp(value, "authorization, content-type") == 0);
    CHECK(http_reply_header(&r, "Access-Control-Allow-Methods", value, sizeof value));
    http_reply_free(&r);
    CHECK(http_get(t.port, "/v1/models", &r));
    CHECK(http_reply_header(&r, "Access-Control-Allow-Origin", value, sizeof value) && strcmp(value, "https://app.example") == 0);
    http_reply_free(&r);
    CHECK(http_post(t.port, "/v1/chat/completions", "{\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &r));
    CHECK(http_reply_header(&r, "Access-Control-Allow-Origin", value, sizeof value));
    http_reply_free(&r);
    CHECK(http_get(t.port, "/nowhere", &r)); /* errors too */
    CHECK(r.status == 404 && http_reply_header(&r, "Access-Control-Allow-Origin", value, sizeof value));
    http_reply_free(&r);
    scripted_stop(&t);
    if (!scripted_start(&t, NULL, false)) return;
    CHECK(http_exchange(t.port, preflight, strlen(preflight), &r, 5000));
    CHECK_EQ_INT(r.status, 405);
    CHECK(!http_reply_header(&r, "Access-Control-Allow-Origin", value, sizeof value));
    http_reply_free(&r);
    CHECK(http_get(t.port, "/v1/models", &r));
    CHECK(!http_reply_header(&r, "Access-Control-Allow-Origin", value, sizeof value));
    http_reply_free(&r);
    scripted_stop(&t);
}

/* The official clients, unmodified: the openai package's tool loop whole and
 * streamed, and LangChain's bindTools().invoke(). */
TEST(server_tools_npm_clients) {
    static const struct { const char *script, *package; } clients[] = {
        {"tools_client.mjs", "openai"},
        {"langchain_client.mjs", "@langchain/openai"},
    };
    Scripted t;
    if (!scripted_start(&t, NULL, false)) return;
    for (int i = 0; i < 2; i++) {
        const char *why, *script = node_script(clients[i].script, clients[i].package, &why);
        if (!script) {
            test_skip(why);
            continue;
        }
        char args[64], *out = NULL;
        snprintf(args, sizeof args, "http://127.0.0.1:%d/v1", t.port);
        CHECK_MSG(run_node_script(script, args, &out), "%s failed:\n%s", clients[i].script, out);
        free(out);
    }
    scripted_stop(&t);
}
