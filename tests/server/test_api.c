/* test_api.c: chat-server's OpenAI API over real sockets on 127.0.0.1: the
 * official openai npm client, streamed against whole replies, stop strings
 * across tokens, logprobs, usage, the pool after many requests, /metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "servers.h"

/* POSTs json and parses the 200 answer; NULL (and a failed check) otherwise. */
static JsonValue *post_ok(int port, const char *path, const char *json) {
    HttpReply r;
    if (!http_post(port, path, json, &r)) {
        test_fail(__FILE__, __LINE__, "no answer to POST %s", path);
        return NULL;
    }
    JsonValue *v = r.status == 200 ? http_reply_json(&r) : NULL;
    CHECK_MSG(v, "POST %s %s: %d %s", path, json, r.status, r.body ? r.body : "");
    http_reply_free(&r);
    return v;
}

/* POSTs a streaming request and collects its text; false if the stream is malformed. */
static bool post_stream(int port, const char *path, const char *json, Buf *text, char *finish, char **body) {
    HttpReply r;
    if (!http_post(port, path, json, &r)) return false;
    char err[ERR_MAX] = "", ctype[64] = "";
    http_reply_header(&r, "Content-Type", ctype, sizeof ctype);
    bool ok = r.status == 200 && strcmp(ctype, "text/event-stream") == 0 && sse_collect(r.body, text, finish, 32, err);
    CHECK_MSG(ok, "streaming POST %s %s: %d %s: %s", path, json, r.status, ctype, err);
    if (body) *body = r.body, r.body = NULL;
    http_reply_free(&r);
    return ok;
}

TEST(server_openai_node_client) {
    const char *why, *script = openai_client_script(&why);
    if (!script) SKIP(why);
    node_client_on_fast_servers(script, "the openai client");
}

TEST(server_stream_equals_whole) {
    static const struct { const char *path, *json; } cases[] = {
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],\"max_tokens\":30,\"temperature\":0%s}"},
        {"/v1/completions", "{\"prompt\":\"Lily and Tom went to the park.\",\"max_tokens\":40,\"temperature\":0%s}"},
        {"/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":25,\"temperature\":0,\"stop\":\"zzz\"%s}"},
    };
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char json[512];
            snprintf(json, sizeof json, cases[i].json, "");
            JsonValue *whole = post_ok(s->port, cases[i].path, json);
            const char *want = json_string_at(whole, "choices", "0", "message", "content", NULL);
            if (!want) want = json_string_at(whole, "choices", "0", "text", NULL);
            snprintf(json, sizeof json, cases[i].json, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
            Buf text = {0};
            char finish[32], *body = NULL;
            if (want && post_stream(s->port, cases[i].path, json, &text, finish, &body)) {
                CHECK_MSG(strcmp(text.data, want) == 0, "%s: streamed '%s' != whole '%s'", c, text.data, want);
                CHECK_STR(finish, json_string_at(whole, "choices", "0", "finish_reason", NULL));
                /* the last chunk before [DONE]: no choices, the usage of the whole reply */
                char *last = strstr(body, "\"choices\":[],\"usage\":");
                CHECK(last && strstr(last, "\"completion_tokens\":") && strstr(last, "data: [DONE]"));
                char want_usage[64];
                snprintf(want_usage, sizeof want_usage, "\"completion_tokens\":%.0f",
                         json_number_at(whole, "usage", "completion_tokens", NULL));
                CHECK(last && strstr(last, want_usage));
                if (strstr(cases[i].path, "chat")) CHECK(strstr(body, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"));
            }
            free(body);
            buf_free(&text);
            json_free(whole);
        }
    }
}

TEST(server_stop_across_tokens) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        /* The greedy continuation with its tokens (legacy logprobs list them). */
        JsonValue *v = post_ok(s->port, "/v1/completions",
                               "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0,\"logprobs\":0}");
        const char *text = json_string_at(v, "choices", "0", "text", NULL);
        const JsonValue *toks = json_get(json_get(json_get(v, "choices") ? &json_get(v, "choices")->items[0] : NULL, "logprobs"), "tokens");
        CHECK(text && toks && toks->n_items == 12);
        if (!text || !toks || toks->n_items < 6) {
            json_free(v);
            continue;
        }
        /* A stop string made of the end of one token and the start of the next. */
        size_t at = 0, k = 2;
        while (k + 1 < toks->n_items && (strlen(toks->items[k].string) < 2 || strlen(toks->items[k + 1].string) < 2)) k++;
        for (size_t i = 0; i < k + 1; i++) at += strlen(toks->items[i].string);
        char stop[16];
        snprintf(stop, sizeof stop, "%.2s", text + at - 2);
        snprintf(stop + 2, sizeof stop - 2, "%.2s", text + at);
        size_t want_len = (size_t)(strstr(text, stop) - text);
        char json[256];
        snprintf(json, sizeof json, "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0,\"stop\":[\"%s\"]}", stop);
        JsonValue *w = post_ok(s->port, "/v1/completions", json);
        const char *got = json_string_at(w, "choices", "0", "text", NULL);
        CHECK_MSG(got && strlen(got) == want_len && strncmp(got, text, want_len) == 0, "%s: stop '%s' in '%s' gave '%s'", c,
                  stop, text, got ? got : "(null)");
        CHECK_STR(json_string_at(w, "choices", "0", "finish_reason", NULL), "stop");
        snprintf(json, sizeof json,
                 "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0,\"stop\":\"%s\",\"stream\":true}", stop);
        Buf streamed = {0};
        char finish[32];
        if (post_stream(s->port, "/v1/completions", json, &streamed, finish, NULL)) {
            CHECK_MSG(streamed.len == want_len && strncmp(streamed.data, text, want_len) == 0, "%s: streamed '%s'", c, streamed.data);
            CHECK_STR(finish, "stop");
        }
        buf_free(&streamed);
        json_free(w);
        json_free(v);
    }
}

TEST(server_chat_usage_logprobs_and_ids) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        JsonValue *v = post_ok(s->port, "/v1/chat/completions",
                               "{\"model\":\"anything\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
                               "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello\"}]}],"
                               "\"max_completion_tokens\":5,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":2,"
                               "\"chat_template_kwargs\":{\"enable_thinking\":false},\"user\":\"ignored\",\"tools\":[]}");
        if (!v) continue;
        CHECK_STR(json_string_at(v, "object", NULL), "chat.completion");
        CHECK(strncmp(json_string_at(v, "id", NULL), "chatcmpl-", 9) == 0);
        CHECK(json_number_at(v, "created", NULL) > 1.6e9);
        CHECK_STR(json_string_at(v, "model", NULL), "default");
        double n = json_number_at(v, "usage", "completion_tokens", NULL);
        CHECK(n >= 1 && n <= 5);
        CHECK_EQ_INT(json_number_at(v, "usage", "total_tokens", NULL),
                     json_number_at(v, "usage", "prompt_tokens", NULL) + n);
        double cached = json_number_at(v, "usage", "prompt_tokens_details", "cached_tokens", NULL);
        CHECK_MSG(one_at_a_time(c) ? cached == 0 : cached >= 0 && cached < json_number_at(v, "usage", "prompt_tokens", NULL),
                  "%s: cached_tokens %g", c, cached); /* III.7's prefix cache may hold the template's first blocks */
        CHECK(json_number_at(v, "timings", "predicted_n", NULL) == n);
        CHECK(json_number_at(v, "timings", "prompt_ms", NULL) >= 0);
        const JsonValue *lp = json_get(json_get(&json_get(v, "choices")->items[0], "logprobs"), "content");
        CHECK(lp && lp->n_items == (size_t)n);
        for (size_t i = 0; lp && i < lp->n_items; i++) {
            CHECK(json_number_at(&lp->items[i], "logprob", NULL) <= 0);
            CHECK(json_get(&lp->items[i], "top_logprobs")->n_items == 2);
            CHECK(json_get(&lp->items[i], "bytes")->type == JSON_ARRAY);
        }
        json_free(v);
    }
}

/* A prompt of about n words. */
static char *words(int n) {
    Buf b = {0};
    for (int i = 0; i < n; i++) buf_puts(&b, i % 7 == 6 ? "dog. " : "the ");
    return b.data;
}

TEST(server_many_requests_leave_the_pool_full) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        for (int i = 0; i < 12; i++) {
            char *p = words(1 + i * 13 % 90);
            int max = 1 + i * 7 % 40;
            bool chat = i % 3 == 0, stream = i % 2 == 1;
            char json[2048];
            if (chat)
                snprintf(json, sizeof json, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":%d,"
                         "\"temperature\":0.7,\"seed\":%d,\"stream\":%s}", p, max, i, stream ? "true" : "false");
            else
                snprintf(json, sizeof json, "{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0,\"stream\":%s}", p, max,
                         stream ? "true" : "false");
            HttpReply r;
            CHECK(http_post(s->port, chat ? "/v1/chat/completions" : "/v1/completions", json, &r) && r.status == 200);
            http_reply_free(&r);
            JsonValue *kv = get_json(s->port, "/v1/kv");
            CHECK_MSG(json_number_at(kv, "blocks_used", NULL) == 0, "%s: request %d left %g blocks used", c, i,
                      json_number_at(kv, "blocks_used", NULL));
            CHECK_EQ_INT(json_number_at(kv, "blocks_total", NULL), 16);
            json_free(kv);
            free(p);
        }
        CHECK_EQ_INT(metric_value(s->port, "chat_server_kv_blocks_used"), 0);
        CHECK_EQ_INT(metric_value(s->port, "chat_server_kv_blocks_total"), 16);
    }
}

TEST(server_metrics_and_models) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        JsonValue *v = post_ok(s->port, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":3,\"temperature\":0}");
        json_free(v);
        HttpReply r;
        CHECK(http_get(s->port, "/metrics", &r) && r.status == 200);
        char ctype[64] = "";
        http_reply_header(&r, "Content-Type", ctype, sizeof ctype);
        CHECK(strncmp(ctype, "text/plain", 10) == 0);
        static const char *const want[] = {
            "# TYPE chat_server_requests_total counter", "chat_server_requests_total{route=\"/v1/completions\",status=\"200\"}",
            "# TYPE chat_server_requests_running gauge", "# TYPE chat_server_requests_waiting gauge",
            "# TYPE chat_server_prompt_tokens_total counter", "# TYPE chat_server_generated_tokens_total counter",
            "# TYPE chat_server_time_to_first_token_seconds histogram", "chat_server_time_to_first_token_seconds_bucket{le=\"+Inf\"}",
            "# TYPE chat_server_inter_token_latency_seconds histogram", "chat_server_kv_blocks_used ", "chat_server_kv_blocks_total 16"};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECK_MSG(r.body && strstr(r.body, want[i]), "%s: /metrics lacks '%s'", c, want[i]);
        http_reply_free(&r);
        double count = metric_value(s->port, "chat_server_time_to_first_token_seconds_count");
        CHECK(count >= 1);
        CHECK_EQ_INT(metric_value(s->port, "chat_server_time_to_first_token_seconds_bucket{le=\"+Inf\"}"), count);
        CHECK(metric_value(s->port, "chat_server_generated_tokens_total") >= 3);
        v = get_json(s->port, "/v1/models");
        CHECK_STR(json_string_at(v, "object", NULL), "list");
        CHECK_STR(json_string_at(v, "data", "0", "id", NULL), "default");
        json_free(v);
        v = get_json(s->port, "/health");
        CHECK_STR(json_string_at(v, "status", NULL), "ok");
        json_free(v);
        v = get_json(s->port, "/v1/kv");
        CHECK(v && json_get(v, "map") && json_get(v, "sequences"));
        json_free(v);
    }
}

TEST(server_chat_server_bad_command_lines) {
    static const struct { const char *args, *want; } cases[] = {
        {"", "missing the model file"},
        {"--bogus models/default.gguf", "unknown option '--bogus'"},
        {"--bind nowhere models/default.gguf", "--bind wants HOST:PORT"},
        {"--bind 127.0.0.1:99999 models/default.gguf", "--bind wants HOST:PORT"},
        {"--queue -1 models/default.gguf", "--queue must be an integer from 0 to"},
        {"--timeout 0 models/default.gguf", "--timeout must be an integer from 1"},
        {"--kv weird models/default.gguf", "unknown KV cache kind 'weird'"},
        {"--max-connections", "needs a value"},
        {"/nonexistent.gguf", "cannot open '/nonexistent.gguf'"},
        {"models/default.gguf extra", "one model file only"},
    };
    FOR_EACH_SERVER_CHAPTER(c) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char cmd[512];
            snprintf(cmd, sizeof cmd, "%s/%s/chat-server %s 2>&1", test_build_dir(), c, cases[i].args);
            FILE *p = popen(cmd, "r");
            char out[2048] = "";
            size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
            out[n] = '\0';
            int st = p ? pclose(p) : -1;
            CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(out, cases[i].want) && !strchr(strchr(out, '\n') + 1, '\n'),
                      "%s: chat-server %s: exit %d, '%s' (want one line with '%s')", c, cases[i].args, WEXITSTATUS(st), out,
                      cases[i].want);
        }
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s/%s/chat-server --help | grep -q -- --max-connections", test_build_dir(), c);
        CHECK(system(cmd) == 0);
    }
}

/* A final assistant message is continued: the prompt leaves it open (no
 * <|im_end|>, no new turn), and the reply is what a completion of exactly
 * that text gives. */
TEST(server_final_assistant_message_is_continued) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        const char *messages = "\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"},"
                               "{\"role\":\"assistant\",\"content\":\"Once upon a time, a little fox\"}]";
        char body[1024];
        snprintf(body, sizeof body, "{%s}", messages);
        JsonValue *t = post_ok(s->port, "/apply-template", body);
        const char *prompt = t ? json_string_at(t, "prompt", NULL) : NULL;
        CHECK_MSG(prompt && strcmp(prompt, "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n"
                                           "<think>\n\n</think>\n\nOnce upon a time, a little fox") == 0,
                  "%s: the continued prompt: %s", c, prompt ? prompt : "(none)");
        snprintf(body, sizeof body, "{%s,\"max_tokens\":16,\"temperature\":0}", messages);
        JsonValue *chat = post_ok(s->port, "/v1/chat/completions", body);
        Buf cb = {0};
        buf_puts(&cb, "{\"prompt\":");
        if (prompt) json_append_string(&cb, prompt, strlen(prompt));
        buf_puts(&cb, ",\"max_tokens\":16,\"temperature\":0}");
        JsonValue *completion = prompt ? post_ok(s->port, "/v1/completions", cb.data) : NULL;
        const char *a = chat ? json_string_at(chat, "choices", "0", "message", "content", NULL) : NULL;
        const char *b = completion ? json_string_at(completion, "choices", "0", "text", NULL) : NULL;
        CHECK_MSG(a && b && strcmp(a, b) == 0, "%s: chat continued '%s', completion '%s'", c, a ? a : "", b ? b : "");
        CHECK(chat && t && json_number_at(chat, "usage", "prompt_tokens", NULL) == (double)json_get(t, "tokens")->n_items);
        buf_free(&cb);
        json_free(t);
        json_free(chat);
        json_free(completion);
    }
}

/* llama-server's text routes: /tokenize, /detokenize, /apply-template; GET /v1/models/{id}. */
TEST(server_tokenize_detokenize_and_model) {
    FOR_EACH_SERVER_CHAPTER(c) {
        ServerProc *s = fast_server(c);
        if (!s) continue;
        JsonValue *t = post_ok(s->port, "/tokenize", "{\"content\":\"<|im_start|>Hello world\"}");
        const JsonValue *ids = t ? json_get(t, "tokens") : NULL;
        CHECK(ids && ids->n_items >= 3 && ids->items[0].type == JSON_NUMBER);
        if (ids) { /* back to the same text */
            Buf b = {0};
            buf_puts(&b, "{\"tokens\":");
            json_append_value(&b, ids, ",", ":");
            buf_puts(&b, "}");
            JsonValue *d = post_ok(s->port, "/detokenize", b.data);
            CHECK_STR(d ? json_string_at(d, "content", NULL) : "", "<|im_start|>Hello world");
            json_free(d);
            buf_free(&b);
        }
        JsonValue *plain = post_ok(s->port, "/tokenize", "{\"content\":\"<|im_start|>Hello world\",\"parse_special\":false}");
        CHECK(plain && ids && json_get(plain, "tokens")->n_items > ids->n_items); /* the marker as plain text */
        JsonValue *pieces = post_ok(s->port, "/tokenize", "{\"content\":\"Hello\",\"with_pieces\":true}");
        const JsonValue *p = pieces ? json_get(pieces, "tokens") : NULL;
        Buf joined = {0};
        for (size_t i = 0; p && i < p->n_items; i++) {
            CHECK(json_get(&p->items[i], "id") && json_get(&p->items[i], "piece"));
            const char *piece = json_string_at(&p->items[i], "piece", NULL);
            if (piece) buf_puts(&joined, piece);
        }
        CHECK_STR(joined.data ? joined.data : "", "Hello");
        buf_free(&joined);
        json_free(t);
        json_free(plain);
        json_free(pieces);
        static const struct { const char *path, *body, *param; } bad[] = {
            {"/tokenize", "{}", "content"},
            {"/tokenize", "{\"content\":3}", "content"},
            {"/tokenize", "{\"content\":\"x\",\"with_pieces\":\"yes\"}", "with_pieces"},
            {"/detokenize", "{\"tokens\":[1,-1]}", "tokens"},
            {"/detokenize", "{\"tokens\":[99999999]}", "tokens"},
            {"/detokenize", "{\"tokens\":\"1 2\"}", "tokens"},
            {"/apply-template", "{\"messages\":[]}", "messages"},
            {"/tokenize", "not json", ""},
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            HttpReply r;
            CHECK(http_post(s->port, bad[i].path, bad[i].body, &r));
            JsonValue *v = http_reply_json(&r);
            const char *param = v ? json_string_at(v, "error", "param", NULL) : NULL;
            CHECK_MSG(r.status == 400 && (param ? strcmp(param, bad[i].param) == 0 : !bad[i].param[0]), "%s %s: %d %s", bad[i].path,
                      bad[i].body, r.status, r.body);
            json_free(v);
            http_reply_free(&r);
        }
        JsonValue *models = get_json(s->port, "/v1/models");
        const char *id = models ? json_string_at(models, "data", "0", "id", NULL) : NULL;
        char path[300];
        snprintf(path, sizeof path, "/v1/models/%s", id ? id : "");
        JsonValue *m = get_json(s->port, path);
        CHECK_STR(m ? json_string_at(m, "id", NULL) : "", id ? id : "?");
        CHECK_STR(m ? json_string_at(m, "object", NULL) : "", "model");
        json_free(m);
        json_free(models);
        HttpReply r;
        CHECK(http_get(s->port, "/v1/models/no-such-model", &r));
        JsonValue *v = http_reply_json(&r);
        CHECK(r.status == 404 && v && strcmp(json_string_at(v, "error", "code", NULL), "model_not_found") == 0 &&
              strcmp(json_string_at(v, "error", "param", NULL), "model") == 0);
        json_free(v);
        http_reply_free(&r);
    }
}
