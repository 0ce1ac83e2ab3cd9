/* test_openai.c: reading OpenAI request bodies (every field, its type and
 * range, what is ignored) and writing responses, chunks and error bodies
 * (common/serve/openai.c). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "openai.h"

static bool parses(OaiRequest *r, OaiKind kind, const char *body) {
    char err[ERR_MAX], param[64];
    if (oai_parse_request(r, kind, body, strlen(body), 1000, err, param) == 0) return true;
    test_fail(__FILE__, __LINE__, "%s: %s", body, err);
    return false;
}

/* The body must be refused with a message containing want and this param. */
static bool refused(OaiKind kind, const char *body, const char *want, const char *want_param) {
    OaiRequest r;
    char err[ERR_MAX] = "", param[64] = "";
    int rc = oai_parse_request(&r, kind, body, strlen(body), 1000, err, param);
    oai_request_free(&r);
    bool ok = rc == -1 && strstr(err, want) && strcmp(param, want_param) == 0;
    if (!ok) printf("    %s -> %d '%s' param '%s' (want '%s', '%s')\n", body, rc, err, param, want, want_param);
    return ok;
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]"

/* response_format (compiled into a grammar), logit_bias, n: read, checked, 400 naming what is wrong. */
TEST(openai_structured_output_bias_and_n) {
    OaiRequest r;
    if (parses(&r, OAI_CHAT, "{" MSG "}")) {
        CHECK(r.grammar == NULL && r.n_bias == 0 && r.n == 1);
        oai_request_free(&r);
    }
    if (parses(&r, OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_object\"},\"n\":3,"
                             "\"logit_bias\":{\"7\":-100,\"999\":2.5}}")) {
        CHECK(r.grammar != NULL && r.n == 3);
        CHECK(r.n_bias == 2 && r.bias_ids[0] == 7 && r.bias[0] == -100.0f && r.bias_ids[1] == 999 && r.bias[1] == 2.5f);
        GrammarState *g = grammar_start(r.grammar);
        CHECK(grammar_feed(g, "{\"a\":1}", 7) && grammar_complete(g));
        grammar_state_free(g);
        oai_request_free(&r);
    }
    if (parses(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                                   "{\"name\":\"a\",\"strict\":true,\"schema\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}}}}")) {
        GrammarState *g = grammar_start(r.grammar);
        CHECK(grammar_feed(g, "[1,2]", 5) && grammar_complete(g) && !grammar_feed(g, "x", 1));
        grammar_state_free(g);
        oai_request_free(&r);
    }
    if (parses(&r, OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"text\"}}")) {
        CHECK(r.grammar == NULL);
        oai_request_free(&r);
    }
    CHECK(refused(OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
                            "{\"anyOf\":[]}}}}", "the keyword 'anyOf' is not supported", "response_format"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}",
                  "'response_format.json_schema.schema' is missing", "response_format"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"response_format\":{}}", "'response_format.type' must be", "response_format"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"logit_bias\":{\"1000\":1}}", "token '1000', which is not a token id (0 to 999)",
                  "logit_bias"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"logit_bias\":{\"1x\":1}}", "token '1x'", "logit_bias"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"logit_bias\":{\"1\":\"a\"}}", "from -100 to 100", "logit_bias"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"n\":0}", "'n' must be an integer from 1 to 16", "n"));
}

/* Several choices: each with its index, usage as given (the prompt once). */
TEST(openai_response_with_choices) {
    OaiRequest q;
    if (!parses(&q, OAI_CHAT, "{" MSG ",\"n\":2}")) return;
    OaiReply a = {.id = "chatcmpl-1", .created = 1, .model = "m"};
    OaiChoice c[2] = {{"one", 3, NULL, 0, "stop", NULL}, {"two", 3, NULL, 0, "length", NULL}};
    GenResult res = {.n_prompt = 5, .n_generated = 7};
    Buf b = {0};
    oai_response_choices_json(&b, &q, &a, c, 2, &res);
    CHECK(strstr(b.data, "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"one\"},"
                         "\"logprobs\":null,\"finish_reason\":\"stop\"},{\"index\":1,"));
    CHECK(strstr(b.data, "\"content\":\"two\"},\"logprobs\":null,\"finish_reason\":\"length\"}]"));
    CHECK(strstr(b.data, "\"prompt_tokens\":5,\"completion_tokens\":7,\"total_tokens\":12"));
    b.len = 0;
    a.index = 1;
    oai_chunk_json(&b, &q, &a, NULL, "x", 1, NULL, 0, NULL);
    CHECK(strstr(b.data, "\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}"));
    buf_free(&b);
    oai_request_free(&q);
}

/* Each choice carries its own parsed reply: reasoning, content, tool calls (ids unique across choices). */
TEST(openai_choices_parsed_each) {
    OaiRequest q;
    if (!parses(&q, OAI_CHAT, "{" MSG ",\"n\":2}")) return;
    OaiReply a = {.id = "chatcmpl-1", .created = 1, .model = "m"};
    static const char one[] = "<think>\nhm\n</think>\n\nIt is sunny.";
    static const char two[] = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    ChatReply p[2];
    ChatReplyOptions opt = {.reasoning = true, .tools = true};
    chat_reply_parse(&p[0], opt, one, strlen(one));
    chat_reply_parse(&p[1], opt, two, strlen(two));
    GenResult res = {.n_prompt = 5, .n_generated = 7, .finish_reason = "stop"};
    OaiChoice c[2];
    for (int i = 0; i < 2; i++) {
        OaiReply ai = a;
        ai.parsed = &p[i];
        c[i] = (OaiChoice){i ? two : one, strlen(i ? two : one), NULL, 0, oai_finish_reason(&ai, &res), &p[i]};
    }
    Buf b = {0};
    oai_response_choices_json(&b, &q, &a, c, 2, &res);
    CHECK_MSG(strstr(b.data, "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"It is sunny.\","
                             "\"reasoning_content\":\"hm\"},\"logprobs\":null,\"finish_reason\":\"stop\"}"), "%s", b.data);
    CHECK_MSG(strstr(b.data, "{\"index\":1,\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,"
                             "\"id\":\"call_1_1_0\",\"type\":\"function\",\"function\":{\"name\":\"now\",\"arguments\":\"{}\"}}]},"
                             "\"logprobs\":null,\"finish_reason\":\"tool_calls\"}"), "%s", b.data);
    b.len = 0;
    a.index = 1;
    oai_reasoning_chunk_json(&b, &q, &a, "hm", 2);
    CHECK(strstr(b.data, "\"choices\":[{\"index\":1,\"delta\":{\"reasoning_content\":\"hm\"}"));
    buf_free(&b);
    chat_reply_free(&p[0]), chat_reply_free(&p[1]);
    oai_request_free(&q);
}

TEST(openai_chat_defaults) {
    OaiRequest r;
    if (!parses(&r, OAI_CHAT, "{" MSG "}")) return;
    CHECK_EQ_INT(r.n_messages, 1);
    CHECK_STR(r.messages[0].role, "user");
    CHECK_STR(r.messages[0].content, "Hi");
    CHECK_EQ_INT(r.max_tokens, -1);
    CHECK_NEAR(r.sampling.temperature, 1.0, 0); /* OpenAI's default */
    CHECK(r.sampling.top_p >= 1 && r.sampling.top_k <= 0 && r.sampling.min_p <= 0);
    CHECK(!r.stream && !r.include_usage && !r.seeded);
    CHECK_EQ_INT(r.n_stop, 0);
    CHECK_EQ_INT(r.top_logprobs, -1);
    CHECK(r.enable_thinking && !r.ignore_eos);
    CHECK(r.model == NULL);
    oai_request_free(&r);
}

TEST(openai_chat_every_field) {
    OaiRequest r;
    const char *body = "{\"model\":\"m\"," MSG ",\"max_tokens\":5,\"max_completion_tokens\":7,\"temperature\":0,"
                       "\"top_p\":0.5,\"top_k\":40,\"min_p\":0.05,\"seed\":-3,\"stop\":[\"a\",\"bc\"],"
                       "\"presence_penalty\":0.5,\"frequency_penalty\":-1,\"repeat_penalty\":1.1,\"n\":1,\"logprobs\":true,"
                       "\"top_logprobs\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                       "\"chat_template_kwargs\":{\"enable_thinking\":false},\"ignore_eos\":true,\"user\":\"u\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                       "\"logit_bias\":{\"1\":2},\"response_format\":{\"type\":\"text\"}}";
    if (!parses(&r, OAI_CHAT, body)) return;
    CHECK_STR(r.model, "m");
    CHECK_EQ_INT(r.max_tokens, 7); /* max_completion_tokens wins */
    CHECK_NEAR(r.sampling.temperature, 0, 0);
    CHECK_NEAR(r.sampling.top_p, 0.5, 1e-7);
    CHECK_EQ_INT(r.sampling.top_k, 40);
    CHECK_NEAR(r.sampling.min_p, 0.05, 1e-7);
    CHECK(r.seeded && r.sampling.seed == (uint64_t)(int64_t)-3);
    CHECK_EQ_INT(r.n_stop, 2);
    CHECK_STR(r.stop[1], "bc");
    CHECK_NEAR(r.sampling.presence_penalty, 0.5, 1e-7);
    CHECK_NEAR(r.sampling.frequency_penalty, -1, 1e-7);
    CHECK_NEAR(r.sampling.repetition_penalty, 1.1, 1e-6);
    CHECK_EQ_INT(r.top_logprobs, 3);
    CHECK(r.stream && r.include_usage && !r.enable_thinking && r.ignore_eos);
    oai_request_free(&r);
}

TEST(openai_nulls_are_absent) {
    OaiRequest r;
    if (!parses(&r, OAI_CHAT, "{" MSG ",\"stop\":null,\"temperature\":null,\"max_tokens\":null,\"seed\":null,\"n\":null}"))
        return;
    CHECK_EQ_INT(r.n_stop, 0);
    CHECK_EQ_INT(r.max_tokens, -1);
    CHECK(!r.seeded);
    oai_request_free(&r);
}

TEST(openai_messages_forms) {
    OaiRequest r;
    const char *body = "{\"messages\":[{\"role\":\"developer\",\"content\":\"Be kind.\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"one\"},{\"type\":\"text\",\"text\":\"two\"}]},"
                       "{\"role\":\"assistant\",\"content\":null},{\"role\":\"tool\",\"content\":\"42\"},"
                       "{\"role\":\"user\",\"content\":\"\\ud83d\\ude00 \\ud800\"}]}";
    if (!parses(&r, OAI_CHAT, body)) return;
    CHECK_EQ_INT(r.n_messages, 5);
    CHECK_STR(r.messages[0].role, "system");
    CHECK_STR(r.messages[1].content, "one\ntwo");
    CHECK_STR(r.messages[2].content, "");
    CHECK_STR(r.messages[3].role, "tool");
    CHECK_STR(r.messages[4].content, "\xf0\x9f\x98\x80 \xef\xbf\xbd"); /* a pair joins; a lone surrogate becomes U+FFFD */
    oai_request_free(&r);
}

TEST(openai_completion_prompt_forms) {
    OaiRequest r;
    if (parses(&r, OAI_COMPLETION, "{\"prompt\":\"Once\",\"logprobs\":2}")) {
        CHECK_STR(r.prompt, "Once");
        CHECK_EQ_INT(r.top_logprobs, 2); /* the legacy logprobs: a count */
        oai_request_free(&r);
    }
    if (parses(&r, OAI_COMPLETION, "{\"prompt\":[\"Once\"]}")) {
        CHECK_STR(r.prompt, "Once");
        oai_request_free(&r);
    }
    if (parses(&r, OAI_COMPLETION, "{\"prompt\":[1,2,999]}")) {
        CHECK(r.prompt == NULL && r.n_prompt_ids == 3 && r.prompt_ids[2] == 999);
        oai_request_free(&r);
    }
    if (parses(&r, OAI_COMPLETION, "{\"prompt\":[[5,6]]}")) {
        CHECK(r.n_prompt_ids == 2 && r.prompt_ids[0] == 5);
        oai_request_free(&r);
    }
}

TEST(openai_refuses_with_the_field_named) {
    CHECK(refused(OAI_CHAT, "{\"messages\":[", "not valid JSON", ""));
    CHECK(refused(OAI_CHAT, "", "not valid JSON", ""));
    CHECK(refused(OAI_CHAT, "\"text\"", "must be a JSON object", ""));
    CHECK(refused(OAI_CHAT, "{}", "'messages' is missing", "messages"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[]}", "non-empty array", "messages"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[1]}", "'messages[0]' must be an object", "messages[0]"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "must be a string", "messages[0].role"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}", "got 'bot'", "messages[0].role"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "is missing", "messages[0].content"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "got a number", "messages[0].content"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "only", "messages[0].content"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"model\":3}", "'model' must be a string", "model"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"temperature\":\"hot\"}", "must be a number, got a string", "temperature"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"temperature\":2.5}", "between 0 and 2", "temperature"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"top_p\":-0.1}", "between 0 and 1", "top_p"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"top_k\":1.5}", "must be an integer, got a fraction", "top_k"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"min_p\":true}", "got a boolean", "min_p"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"presence_penalty\":3}", "between -2 and 2", "presence_penalty"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"max_tokens\":0}", "from 1 to", "max_tokens"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"max_tokens\":1e300}", "from 1 to", "max_tokens"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"max_tokens\":1e999}", "too large for a double", ""));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"max_completion_tokens\":\"5\"}", "got a string", "max_completion_tokens"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"seed\":0.5}", "'seed' must be an integer", "seed"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"seed\":1e30}", "'seed' must be an integer", "seed"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"n\":17}", "'n' must be an integer from 1 to 16", "n"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"stop\":5}", "string or an array", "stop"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"stop\":[\"a\",null]}", "'stop[1]' must be a string", "stop"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
                                     "\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}", "at most 16", "stop"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"stream\":1}", "'stream' must be true or false", "stream"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"ignore_eos\":\"yes\"}", "'ignore_eos' must be true or false", "ignore_eos"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"stream_options\":[]}", "must be an object", "stream_options"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"top_logprobs\":2}", "needs 'logprobs': true", "top_logprobs"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"logprobs\":true,\"top_logprobs\":21}", "from 0 to 20", "top_logprobs"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}", "true or false", "enable_thinking"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}", "invalid UTF-8", ""));
    char deep[300] = "{" MSG ",\"x\":";
    for (int i = 0; i < 70; i++) strcat(deep, "[");
    CHECK(refused(OAI_CHAT, deep, "nesting deeper than 64", ""));
    CHECK(refused(OAI_COMPLETION, "{}", "'prompt' is missing", "prompt"));
    CHECK(refused(OAI_COMPLETION, "{\"prompt\":[]}", "'prompt' is empty", "prompt"));
    CHECK(refused(OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "one per request", "prompt"));
    CHECK(refused(OAI_COMPLETION, "{\"prompt\":[1,1000]}", "'prompt[1]' must be a token id from 0 to 999", "prompt"));
    CHECK(refused(OAI_COMPLETION, "{\"prompt\":[1,-1]}", "token id", "prompt"));
    CHECK(refused(OAI_COMPLETION, "{\"prompt\":{}}", "got an object", "prompt"));
    CHECK(refused(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "'logprobs' must be an integer", "logprobs"));
}

static JsonValue *parse_json(const Buf *b) {
    char err[ERR_MAX];
    JsonValue *v = json_parse(b->data, b->len, err);
    CHECK_MSG(v, "%s: %s", err, b->data);
    return v;
}

TEST(openai_error_bodies) {
    static const struct { int status; const char *type, *code; } cases[] = {
        {400, "invalid_request_error", NULL}, {401, "authentication_error", "invalid_api_key"},
        {404, "invalid_request_error", "not_found"}, {413, "invalid_request_error", "request_too_large"},
        {429, "rate_limit_error", "rate_limit_exceeded"}, {503, "unavailable_error", "server_busy"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Buf b = {0};
        oai_error_json(&b, cases[i].status, "what \"went\" wrong", i == 0 ? "temperature" : NULL);
        JsonValue *v = parse_json(&b);
        const JsonValue *e = json_get(v, "error");
        CHECK(e && json_get(e, "message") && strcmp(json_get(e, "message")->string, "what \"went\" wrong") == 0);
        CHECK_STR(json_get(e, "type")->string, cases[i].type);
        const JsonValue *param = json_get(e, "param"), *code = json_get(e, "code");
        CHECK(i == 0 ? param->type == JSON_STRING : param->type == JSON_NULL);
        CHECK(cases[i].code ? code->type == JSON_STRING && strcmp(code->string, cases[i].code) == 0 : code->type == JSON_NULL);
        json_free(v);
        buf_free(&b);
    }
}

TEST(openai_response_and_chunks) {
    OaiRequest q;
    if (!parses(&q, OAI_CHAT, "{" MSG ",\"stream_options\":{\"include_usage\":true}}")) return;
    OaiReply a = {.id = "chatcmpl-1", .created = 1700000000, .model = "m"};
    double times[3] = {10, 12, 15};
    GenResult res = {.finish_reason = "stop", .n_prompt = 9, .n_cached = 2, .n_generated = 3, .t_submit = 1,
                     .t_begin = 2, .t_prefill = 7, .t_first = 10, .t_last = 15, .token_times = times};
    Buf b = {0};
    oai_response_json(&b, &q, &a, "Hi \"there\"\n", 11, NULL, 0, &res);
    JsonValue *v = parse_json(&b);
    CHECK_STR(json_get(v, "object")->string, "chat.completion");
    CHECK_STR(json_get(v, "id")->string, "chatcmpl-1");
    const JsonValue *choice = &json_get(v, "choices")->items[0];
    CHECK_STR(json_get(json_get(choice, "message"), "content")->string, "Hi \"there\"\n");
    CHECK_STR(json_get(json_get(choice, "message"), "role")->string, "assistant");
    CHECK_STR(json_get(choice, "finish_reason")->string, "stop");
    CHECK(json_get(choice, "logprobs")->type == JSON_NULL);
    const JsonValue *u = json_get(v, "usage");
    CHECK_EQ_INT(json_get(u, "prompt_tokens")->number, 9);
    CHECK_EQ_INT(json_get(u, "completion_tokens")->number, 3);
    CHECK_EQ_INT(json_get(u, "total_tokens")->number, 12);
    CHECK_EQ_INT(json_get(json_get(u, "prompt_tokens_details"), "cached_tokens")->number, 2);
    const JsonValue *t = json_get(v, "timings");
    CHECK_EQ_INT(json_get(t, "cache_n")->number, 2);
    CHECK_EQ_INT(json_get(t, "prompt_n")->number, 7);
    CHECK_NEAR(json_get(t, "prompt_ms")->number, 5, 1e-9);
    CHECK_NEAR(json_get(t, "predicted_ms")->number, 8, 1e-9);
    CHECK_NEAR(json_get(t, "predicted_per_second")->number, 375, 1e-9);
    json_free(v);

    b.len = 0;
    oai_chunk_json(&b, &q, &a, "assistant", "", 0, NULL, 0, NULL);
    v = parse_json(&b);
    CHECK_STR(json_get(v, "object")->string, "chat.completion.chunk");
    const JsonValue *delta = json_get(&json_get(v, "choices")->items[0], "delta");
    CHECK_STR(json_get(delta, "role")->string, "assistant");
    CHECK_STR(json_get(delta, "content")->string, "");
    CHECK(json_get(v, "usage")->type == JSON_NULL); /* include_usage: null in every chunk but the last */
    json_free(v);
    b.len = 0;
    oai_chunk_json(&b, &q, &a, NULL, NULL, 0, NULL, 0, "length");
    v = parse_json(&b);
    const JsonValue *c0 = &json_get(v, "choices")->items[0];
    CHECK(json_get(c0, "delta")->n_items == 0);
    CHECK_STR(json_get(c0, "finish_reason")->string, "length");
    json_free(v);
    b.len = 0;
    oai_usage_chunk_json(&b, &q, &a, &res);
    v = parse_json(&b);
    CHECK(json_get(v, "choices")->n_items == 0);
    CHECK_EQ_INT(json_get(json_get(v, "usage"), "total_tokens")->number, 12);
    json_free(v);
    buf_free(&b);
    oai_request_free(&q);

    if (!parses(&q, OAI_COMPLETION, "{\"prompt\":\"x\"}")) return;
    oai_chunk_json(&b, &q, &a, "assistant", "abc", 3, NULL, 0, NULL);
    v = parse_json(&b);
    CHECK_STR(json_get(v, "object")->string, "text_completion");
    CHECK_STR(json_get(&json_get(v, "choices")->items[0], "text")->string, "abc");
    json_free(v);
    buf_free(&b);
    oai_request_free(&q);
}

#define TWO_TOOLS                                                                                                  \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","  \
    "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"                                   \
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]"

/* Tools as the template shows them, the history's calls, and what tool_choice
 * asks of the reply (the prefill now, the constraint for the sampler). */
TEST(openai_tools_and_tool_choice) {
    OaiRequest r;
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":null,"
                       "\"reasoning_content\":\"think\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
                       "{\"name\":\"now\",\"arguments\":{\"tz\":\"UTC\",\"n\":[1,2]}}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
                       "\"content\":\"12:00\"}]," TWO_TOOLS "}";
    if (parses(&r, OAI_CHAT, body)) {
        CHECK_EQ_INT(r.n_tools, 2);
        CHECK_STR(r.tools[0], "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
                              "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}");
        CHECK(r.tool_choice == OAI_TOOLS_AUTO && oai_tools_shown(&r) && !r.continue_final);
        CHECK_EQ_INT(r.messages[1].n_tool_calls, 1);
        CHECK_STR(r.messages[1].tool_calls[0].name, "now");
        CHECK_STR(r.messages[1].tool_calls[0].arguments, "{\"tz\": \"UTC\", \"n\": [1, 2]}"); /* an object: tojson */
        CHECK_STR(r.messages[1].reasoning_content, "think");
        Buf b = {0};
        const char *suffix = NULL;
        oai_reply_prefix(&r, &b);
        CHECK(b.len == 0 && !oai_tool_constraint(&r, &b, &suffix));
        buf_free(&b);
    }
    oai_request_free(&r);
    if (parses(&r, OAI_CHAT, "{" MSG "," TWO_TOOLS ",\"tool_choice\":\"required\"}")) {
        Buf prefix = {0}, schema = {0};
        const char *suffix = NULL;
        oai_reply_prefix(&r, &prefix);
        CHECK_STR(prefix.data, "<tool_call>\n");
        CHECK(oai_tool_constraint(&r, &schema, &suffix));
        CHECK_STR(schema.data, "{\"type\":\"object\",\"properties\":{\"name\":{\"enum\":[\"get_weather\",\"now\"]},"
                               "\"arguments\":{\"type\":\"object\"}},\"required\":[\"name\",\"arguments\"],"
                               "\"additionalProperties\":false}");
        CHECK(r.grammar != NULL); /* compiled: the sampler enforces it */
        CHECK_STR(suffix, "\n</tool_call>");
        buf_free(&prefix);
        buf_free(&schema);
    }
    oai_request_free(&r);
    if (parses(&r, OAI_CHAT, "{" MSG "," TWO_TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}}")) {
        Buf prefix = {0}, schema = {0};
        const char *suffix = NULL;
        CHECK(r.tool_choice == OAI_TOOLS_FUNCTION && r.tool_choice_index == 0);
        oai_reply_prefix(&r, &prefix);
        CHECK_STR(prefix.data, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
        CHECK(oai_tool_constraint(&r, &schema, &suffix));
        CHECK_STR(schema.data, "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}");
        CHECK_STR(suffix, "}\n</tool_call>");
        buf_free(&prefix);
        buf_free(&schema);
    }
    oai_request_free(&r);
    if (parses(&r, OAI_CHAT, "{" MSG "," TWO_TOOLS ",\"tool_choice\":\"none\"}")) CHECK(!oai_tools_shown(&r));
    oai_request_free(&r);
    if (parses(&r, OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Once\"}]}"))
        CHECK(r.continue_final);
    oai_request_free(&r);
    CHECK(refused(OAI_CHAT, "{" MSG ",\"tools\":{}}", "'tools' must be an array", "tools"));
    CHECK(refused(OAI_CHAT, "{" MSG ",\"tools\":[{\"function\":{\"name\":\"\"}}]}", "function name", "tools[0].function.name"));
    CHECK(refused(OAI_CHAT, "{" MSG "," TWO_TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"x\"}}}",
                  "not in 'tools'", "tool_choice"));
    CHECK(refused(OAI_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"reasoning_content\":3}]}", "must be a string",
                  "messages[0].reasoning_content"));
    CHECK(refused(OAI_CHAT, "{" MSG "," TWO_TOOLS ",\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}",
                  "both constrain the reply", "response_format"));
    /* parameters the grammar cannot enforce (pattern): the call is still forced, its arguments any object */
    if (parses(&r, OAI_CHAT, "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
                             "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"^x\"}}}}}],"
                             "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}")) {
        CHECK(r.grammar != NULL);
        GrammarState *g = r.grammar ? grammar_start(r.grammar) : NULL;
        const char *reply = "{\"b\": 1}}\n</tool_call>";
        CHECK(g && grammar_feed(g, reply, strlen(reply)) && grammar_complete(g));
        grammar_state_free(g);
    }
    oai_request_free(&r);
}
