/* test_structured.c: chat-server's structured output (response_format, by
 * constrained sampling), logit_bias and n > 1, over real sockets, and through
 * LangChain's ChatOpenAI and the openai client (structured_client.mjs). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "harness.h"
#include "servers.h"
#include "tokenizer.h"

static JsonValue *post_json(int port, const char *json, int want_status, const char *want_text) {
    HttpReply r;
    if (!http_post(port, "/v1/chat/completions", json, &r)) {
        test_fail(__FILE__, __LINE__, "no answer to %s", json);
        return NULL;
    }
    CHECK_MSG(r.status == want_status && (!want_text || (r.body && strstr(r.body, want_text))),
              "%s: %d %s (want %d with '%s')", json, r.status, r.body ? r.body : "", want_status, want_text ? want_text : "");
    JsonValue *v = r.status == 200 ? http_reply_json(&r) : NULL;
    http_reply_free(&r);
    return v;
}

TEST(server_structured_and_choices_node_clients) {
    const char *why, *script = node_script("structured_client.mjs", "@langchain/openai", &why);
    if (!script) SKIP(why);
    node_client_on_fast_servers(script, "the LangChain and openai clients");
}

/* At temperature 1 the default model writes stories; with a schema the reply parses and matches it. */
TEST(server_response_format_makes_json) {
    static const char *const formats[] = {
        "{\"type\":\"json_object\"}",
        "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"t\",\"schema\":{\"type\":\"object\",\"properties\":{"
        "\"title\":{\"type\":\"string\",\"maxLength\":12},\"n\":{\"type\":\"integer\"},\"ok\":{\"enum\":[\"yes\",\"no\"]},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":8},\"maxItems\":2}},"
        "\"required\":[\"title\",\"n\",\"ok\",\"tags\"],\"additionalProperties\":false}}}",
    };
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        for (int f = 0; f < 2; f++)
            for (int seed = 1; seed <= 3; seed++) {
                char json[1024];
                snprintf(json, sizeof json, "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],"
                         "\"max_tokens\":200,\"temperature\":1,\"seed\":%d,\"response_format\":%s}", seed, formats[f]);
                JsonValue *v = post_json(s->port, json, 200, NULL);
                const char *text = json_string_at(v, "choices", "0", "message", "content", NULL);
                const char *finish = json_string_at(v, "choices", "0", "finish_reason", NULL);
                char err[ERR_MAX];
                JsonValue *doc = text ? json_parse(text, strlen(text), err) : NULL;
                if (f == 1 || (finish && strcmp(finish, "stop") == 0))
                    CHECK_MSG(doc && doc->type == JSON_OBJECT, "%s seed %d: '%s' (%s) is not a JSON object", c, seed,
                              text ? text : "", finish ? finish : "");
                if (f == 1 && doc) {
                    CHECK(json_get(doc, "title") && json_get(doc, "title")->type == JSON_STRING);
                    CHECK(json_get(doc, "n") && json_get(doc, "n")->type == JSON_NUMBER);
                    const JsonValue *ok = json_get(doc, "ok");
                    CHECK(ok && ok->type == JSON_STRING && (!strcmp(ok->string, "yes") || !strcmp(ok->string, "no")));
                    CHECK(json_get(doc, "tags") && json_get(doc, "tags")->n_items <= 2);
                    CHECK(doc->n_items == 4);
                }
                json_free(doc);
                json_free(v);
            }
        /* max_tokens still ends the reply: cut, finish_reason "length" */
        JsonValue *v = post_json(s->port, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3,"
                                 "\"seed\":1,\"response_format\":{\"type\":\"json_object\"}}", 200, NULL);
        CHECK_STR(json_string_at(v, "choices", "0", "finish_reason", NULL), "length");
        json_free(v);
    }
}

TEST(server_response_format_and_logit_bias_errors) {
    static const char *const cases[][2] = {
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"object\","
         "\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}", "the keyword 'pattern'"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"oneOf\":[]}}}", "'oneOf'"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"$ref\":\"#/a\"}}}", "'$ref'"},
        {"\"response_format\":{\"type\":\"json_schema\"}", "response_format.json_schema"},
        {"\"response_format\":{\"type\":\"xml\"}", "json_object or json_schema, got 'xml'"},
        {"\"response_format\":\"json\"", "'response_format' must be an object"},
        {"\"logit_bias\":{\"999999\":5}", "token '999999'"},
        {"\"logit_bias\":{\"-1\":5}", "token '-1'"},
        {"\"logit_bias\":{\"abc\":5}", "token 'abc'"},
        {"\"logit_bias\":{\"5\":101}", "from -100 to 100"},
        {"\"logit_bias\":[1]", "'logit_bias' must be an object"},
        {"\"n\":0", "'n'"},
        {"\"n\":17", "'n'"},
    };
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            char json[1024];
            snprintf(json, sizeof json, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":4,%s}", cases[i][0]);
            json_free(post_json(s->port, json, 400, cases[i][1]));
        }
    }
}

/* The id of the token whose text is text (one token), from the default model's vocabulary; -1 if none. */
static int token_id(const char *text) {
    GgufFile f;
    char err[ERR_MAX];
    if (gguf_open(&f, default_model_path(), err)) return -1;
    Tokenizer *tok = tokenizer_load(&f, err);
    gguf_close(&f);
    int32_t *ids = NULL;
    int n = 0, id = -1;
    if (tok && tokenizer_encode(tok, text, strlen(text), false, &ids, &n, err) == 0 && n == 1) id = ids[0];
    free(ids);
    tokenizer_free(tok);
    return id;
}

/* The first token of a greedy completion with bias (JSON members, may be ""). */
static char *first_token(int port, const char *bias) {
    char json[512];
    snprintf(json, sizeof json, "{\"prompt\":\"Once upon a time\",\"max_tokens\":1,\"temperature\":0,\"logprobs\":0%s}", bias);
    HttpReply r;
    char *t = NULL;
    if (http_post(port, "/v1/completions", json, &r) && r.status == 200) {
        JsonValue *v = http_reply_json(&r);
        const char *s = json_string_at(v, "choices", "0", "logprobs", "tokens", "0", NULL);
        t = s ? xstrdup(s) : NULL;
        json_free(v);
    }
    CHECK_MSG(t, "%s: %d %s", json, r.status, r.body ? r.body : "");
    http_reply_free(&r);
    return t;
}

/* -100 bans a token: the greedy reply's first token never comes; +100 forces another. */
TEST(server_logit_bias_bans_and_forces) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        char *top = first_token(s->port, "");
        int id = top ? token_id(top) : -1, other = token_id(" the");
        CHECK_MSG(id >= 0 && other >= 0 && other != id, "'%s' is token %d, ' the' %d", top ? top : "", id, other);
        char bias[128];
        snprintf(bias, sizeof bias, ",\"logit_bias\":{\"%d\":-100}", id);
        char *banned = first_token(s->port, bias);
        CHECK_MSG(banned && top && strcmp(banned, top) != 0, "%s: token %d ('%s') banned, yet chosen", c, id, top);
        snprintf(bias, sizeof bias, ",\"logit_bias\":{\"%d\":100}", other);
        char *forced = first_token(s->port, bias);
        CHECK_MSG(forced && strcmp(forced, " the") == 0, "%s: token %d forced, got '%s'", c, other, forced ? forced : "");
        free(top), free(banned), free(forced);
    }
}

/* n = 3 streamed: every chunk names its choice, each choice ends once, and
 * the texts are the whole reply's. */
TEST(server_choices_stream_with_index) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        const char *ask = "{\"messages\":[{\"role\":\"user\",\"content\":\"Write a story\"}],\"max_tokens\":20,"
                          "\"temperature\":1,\"seed\":9,\"n\":3%s}";
        char json[512];
        snprintf(json, sizeof json, ask, "");
        JsonValue *whole = post_json(s->port, json, 200, NULL);
        snprintf(json, sizeof json, ask, ",\"stream\":true");
        HttpReply r;
        CHECK(http_post(s->port, "/v1/chat/completions", json, &r) && r.status == 200);
        Buf text[3] = {{0}};
        int finishes[3] = {0};
        for (char *line = r.body; line && (line = strstr(line, "data: {")); line++) {
            char *end = strstr(line, "\n\n");
            if (!end) break;
            char err[ERR_MAX];
            JsonValue *chunk = json_parse(line + 6, (size_t)(end - line - 6), err);
            const JsonValue *choices = chunk ? json_get(chunk, "choices") : NULL;
            for (size_t k = 0; choices && k < choices->n_items; k++) {
                const JsonValue *ch = &choices->items[k], *idx = json_get(ch, "index"), *d = json_get(ch, "delta");
                int i = idx ? (int)idx->number : -1;
                CHECK(i >= 0 && i < 3);
                if (i < 0 || i >= 3) continue;
                const JsonValue *content = d ? json_get(d, "content") : NULL;
                if (content && content->type == JSON_STRING) buf_append(&text[i], content->string, content->string_len);
                const JsonValue *fin = json_get(ch, "finish_reason");
                finishes[i] += fin && fin->type == JSON_STRING;
            }
            json_free(chunk);
        }
        for (int i = 0; i < 3; i++) {
            char idx[4];
            snprintf(idx, sizeof idx, "%d", i);
            const char *want = json_string_at(whole, "choices", idx, "message", "content", NULL);
            buf_append(&text[i], "", 0);
            CHECK_MSG(want && strcmp(text[i].data, want) == 0, "%s choice %d: streamed '%s', whole '%s'", c, i, text[i].data,
                      want ? want : "");
            CHECK_EQ_INT(finishes[i], 1);
            buf_free(&text[i]);
        }
        http_reply_free(&r);
        json_free(whole);
    }
}

/* Characters (not bytes) of a UTF-8 string. */
static size_t characters(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += ((unsigned char)s[i] & 0xC0) != 0x80;
    return count;
}

/* A forced call's arguments: an object {"city": at most 6 characters, "unit": "c" or "f"}, nothing else. */
static void check_weather_arguments(const char *chapter, const char *args) {
    char err[ERR_MAX];
    JsonValue *a = args ? json_parse(args, strlen(args), err) : NULL;
    const JsonValue *city = a ? json_get(a, "city") : NULL, *unit = a ? json_get(a, "unit") : NULL;
    CHECK_MSG(a && a->type == JSON_OBJECT && a->n_items == 2, "%s: arguments '%s'", chapter, args ? args : "(none)");
    CHECK_MSG(city && city->type == JSON_STRING && characters(city->string, city->string_len) <= 6, "%s: city in '%s'",
              chapter, args ? args : "");
    CHECK_MSG(unit && unit->type == JSON_STRING && (!strcmp(unit->string, "c") || !strcmp(unit->string, "f")),
              "%s: unit in '%s'", chapter, args ? args : "");
    json_free(a);
}

/* tool_choice required and a named function go through the constrained
 * sampler: the reply after the prefill is a valid call, its arguments
 * matching the tool's parameters, at temperature 1, on a model whose
 * weights are random (nothing but the grammar makes it a call). Qwen3's
 * tools system prompt alone (some 290 tokens) is longer than the default
 * model's context of 256, so this runs on the slow test model (mkmodel, a
 * context of 512) with its default backend and a pool of 64 blocks for the
 * two choices; n = 2 gives each choice its own call. */
TEST(server_tool_choice_forces_a_valid_call) {
    static const char *const choices[] = {"{\"type\":\"function\",\"function\":{\"name\":\"weather\"}}", "\"required\""};
    const char *args[] = {slow_model_path(), "--kv-blocks", "64", "--queue", "2", NULL};
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc s;
        if (!server_proc_start(&s, c, args)) {
            test_fail(__FILE__, __LINE__, "%s: the chat-server on %s did not start", c, slow_model_path());
            continue;
        }
        for (int i = 0; i < 2; i++) {
            char json[1024];
            snprintf(json, sizeof json, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":[{\"type\":\"function\","
                     "\"function\":{\"name\":\"weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                     "\"string\",\"maxLength\":6},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"],"
                     "\"additionalProperties\":false}}}],\"tool_choice\":%s,\"temperature\":1,\"seed\":%d,\"n\":2,"
                     "\"max_tokens\":90}", choices[i], i + 1);
            HttpReply r;   /* a sanitized build reads the 400-token prompt slowly: minutes, not the usual 60 s */
            char raw[1536];
            snprintf(raw, sizeof raw, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", strlen(json), json);
            CHECK_MSG(http_exchange(s.port, raw, strlen(raw), &r, test_sanitized() ? 600000 : 60000) && r.status == 200,
                      "%s: %d %s", c, r.status, r.body ? r.body : "");
            JsonValue *v = r.status == 200 ? http_reply_json(&r) : NULL;
            http_reply_free(&r);
            for (int k = 0; v && k < 2; k++) {
                char idx[4];
                snprintf(idx, sizeof idx, "%d", k);
                CHECK_STR(json_string_at(v, "choices", idx, "finish_reason", NULL), "tool_calls");
                CHECK_STR(json_string_at(v, "choices", idx, "message", "tool_calls", "0", "function", "name", NULL), "weather");
                check_weather_arguments(c, json_string_at(v, "choices", idx, "message", "tool_calls", "0", "function",
                                                          "arguments", NULL));
            }
            json_free(v);
        }
        /* response_format constrains the reply too: asking for both is a 400 naming the conflict */
        json_free(post_json(s.port, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":[{\"type\":\"function\","
                            "\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"required\",\"response_format\":{\"type\":"
                            "\"json_object\"}}", 400, "both constrain the reply"));
        server_proc_stop(&s, SIGTERM);
    }
}
