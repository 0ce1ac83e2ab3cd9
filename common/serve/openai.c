/* openai.c: see openai.h. */
#include "openai.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading a request ------------------------------------------------------------ */

typedef struct {
    char *err;
    char *param;  /* [64] */
} Ctx;

static int failf(Ctx *c, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(Ctx *c, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, ERR_MAX, fmt, ap);
    va_end(ap);
    snprintf(c->param, 64, "%s", param);
    return -1;
}

static const char *type_name(const JsonValue *v) {
    switch (v->type) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    default: return "an object";
    }
}

/* A member, with null meaning absent (clients send "stop": null and so on). */
static const JsonValue *field(const JsonValue *obj, const char *key) {
    const JsonValue *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

static int get_number(Ctx *c, const JsonValue *obj, const char *key, double lo, double hi, float *out) {
    const JsonValue *v = field(obj, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER) return failf(c, key, "'%s' must be a number, got %s", key, type_name(v));
    if (!(v->number >= lo && v->number <= hi))
        return failf(c, key, "'%s' must be between %g and %g, got %g", key, lo, hi, v->number);
    *out = (float)v->number;
    return 0;
}

static int get_int(Ctx *c, const JsonValue *obj, const char *key, double lo, double hi, int *out) {
    const JsonValue *v = field(obj, key);
    if (!v) return 0;
    if (v->type != JSON_NUMBER || v->number != floor(v->number))
        return failf(c, key, "'%s' must be an integer, got %s", key, v->type == JSON_NUMBER ? "a fraction" : type_name(v));
    if (!(v->number >= lo && v->number <= hi))
        return failf(c, key, "'%s' must be an integer from %.0f to %.0f, got %g", key, lo, hi, v->number);
    *out = (int)v->number;
    return 0;
}

static int get_bool(Ctx *c, const JsonValue *obj, const char *key, bool *out) {
    const JsonValue *v = field(obj, key);
    if (!v) return 0;
    if (v->type != JSON_BOOL) return failf(c, key, "'%s' must be true or false, got %s", key, type_name(v));
    *out = v->boolean;
    return 0;
}

static int get_seed(Ctx *c, const JsonValue *obj, OaiRequest *r) {
    const JsonValue *v = field(obj, "seed");
    if (!v) return 0;
    if (v->type != JSON_NUMBER || v->number != floor(v->number) || fabs(v->number) > 9.2e18)
        return failf(c, "seed", "'seed' must be an integer (64-bit), got %s", type_name(v));
    r->sampling.seed = v->number < 0 ? (uint64_t)(int64_t)v->number : (uint64_t)v->number;
    r->seeded = true;
    return 0;
}

static int get_stop(Ctx *c, const JsonValue *obj, OaiRequest *r) {
    const JsonValue *v = field(obj, "stop");
    if (!v) return 0;
    if (v->type == JSON_STRING) {
        r->stop[r->n_stop++] = v->string;
        return 0;
    }
    if (v->type != JSON_ARRAY) return failf(c, "stop", "'stop' must be a string or an array of strings, got %s", type_name(v));
    if (v->n_items > OAI_MAX_STOP) return failf(c, "stop", "'stop' has %zu strings; at most %d", v->n_items, OAI_MAX_STOP);
    for (size_t i = 0; i < v->n_items; i++) {
        if (v->items[i].type != JSON_STRING)
            return failf(c, "stop", "'stop[%zu]' must be a string, got %s", i, type_name(&v->items[i]));
        r->stop[r->n_stop++] = v->items[i].string;
    }
    return 0;
}

static int get_sampling(Ctx *c, const JsonValue *o, OaiRequest *r) {
    SamplerParams *s = &r->sampling;
    *s = sampler_params_default();
    s->temperature = 1.0f; /* OpenAI's default; 0 asks for greedy */
    if (get_number(c, o, "temperature", 0, 2, &s->temperature) || get_number(c, o, "top_p", 0, 1, &s->top_p) ||
        get_int(c, o, "top_k", -1, 1e9, &s->top_k) || get_number(c, o, "min_p", 0, 1, &s->min_p) ||
        get_number(c, o, "presence_penalty", -2, 2, &s->presence_penalty) ||
        get_number(c, o, "frequency_penalty", -2, 2, &s->frequency_penalty) ||
        get_number(c, o, "repetition_penalty", 0.01, 10, &s->repetition_penalty) ||
        get_number(c, o, "repeat_penalty", 0.01, 10, &s->repetition_penalty) || get_seed(c, o, r))
        return -1;
    return 0;
}

/* ---- structured output, logit_bias, n ------------------------------------------------- */

/* response_format: {"type": "text"}, {"type": "json_object"} (llama-server's
 * form may add "schema"), or {"type": "json_schema", "json_schema": {"name",
 * "schema", "strict"}}: compiled into the grammar that constrains the reply. */
static int get_response_format(Ctx *c, const JsonValue *o, OaiRequest *r) {
    const JsonValue *f = field(o, "response_format"), *type = f ? field(f, "type") : NULL;
    if (!f) return 0;
    if (f->type != JSON_OBJECT) return failf(c, "response_format", "'response_format' must be an object, got %s", type_name(f));
    if (!type || type->type != JSON_STRING)
        return failf(c, "response_format", "'response_format.type' must be text, json_object or json_schema");
    const JsonValue *schema = NULL;
    if (strcmp(type->string, "text") == 0) return 0;
    if (strcmp(type->string, "json_object") == 0) {
        schema = field(f, "schema");
    } else if (strcmp(type->string, "json_schema") == 0) {
        const JsonValue *js = field(f, "json_schema");
        if (!js || js->type != JSON_OBJECT)
            return failf(c, "response_format", "'response_format.json_schema' must be an object with the schema");
        if (!(schema = field(js, "schema")))
            return failf(c, "response_format", "'response_format.json_schema.schema' is missing");
    } else {
        return failf(c, "response_format", "'response_format.type' must be text, json_object or json_schema, got '%s'",
                     type->string);
    }
    char err[ERR_MAX];
    if (!(r->grammar = grammar_create(NULL, schema, NULL, err))) return failf(c, "response_format", "%s", err);
    return 0;
}

/* logit_bias: {"token id": bias from -100 to 100}. */
static int get_logit_bias(Ctx *c, const JsonValue *o, int vocab_size, OaiRequest *r) {
    const JsonValue *b = field(o, "logit_bias");
    if (!b) return 0;
    if (b->type != JSON_OBJECT) return failf(c, "logit_bias", "'logit_bias' must be an object {\"token id\": bias}, got %s", type_name(b));
    r->bias_ids = xmalloc(sizeof *r->bias_ids * (b->n_items + 1));
    r->bias = xmalloc(sizeof *r->bias * (b->n_items + 1));
    for (size_t i = 0; i < b->n_items; i++) {
        char *end;
        long id = strtol(b->keys[i], &end, 10);
        if (!*b->keys[i] || *end || id < 0 || id >= vocab_size)
            return failf(c, "logit_bias", "'logit_bias' names token '%.32s', which is not a token id (0 to %d)", b->keys[i],
                         vocab_size - 1);
        const JsonValue *v = &b->items[i];
        if (v->type != JSON_NUMBER || !(v->number >= -100 && v->number <= 100))
            return failf(c, "logit_bias", "'logit_bias' of token %ld must be a number from -100 to 100", id);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)v->number;
    }
    return 0;
}

static int get_choices(Ctx *c, const JsonValue *o, OaiRequest *r) {
    r->n = 1;
    return get_int(c, o, "n", 1, OAI_MAX_CHOICES, &r->n);
}

static int get_max_tokens(Ctx *c, const JsonValue *o, OaiRequest *r) {
    r->max_tokens = -1;
    if (get_int(c, o, "max_tokens", 1, 2147483647.0, &r->max_tokens)) return -1;
    return get_int(c, o, "max_completion_tokens", 1, 2147483647.0, &r->max_tokens);
}

static int get_stream(Ctx *c, const JsonValue *o, OaiRequest *r) {
    if (get_bool(c, o, "stream", &r->stream)) return -1;
    const JsonValue *so = field(o, "stream_options");
    if (!so) return 0;
    if (so->type != JSON_OBJECT)
        return failf(c, "stream_options", "'stream_options' must be an object, got %s", type_name(so));
    return get_bool(c, so, "include_usage", &r->include_usage);
}

static int get_logprobs(Ctx *c, const JsonValue *o, OaiRequest *r) {
    r->top_logprobs = -1;
    if (r->kind == OAI_COMPLETION) /* the legacy API: logprobs is the number of alternatives */
        return get_int(c, o, "logprobs", 0, 5, &r->top_logprobs);
    bool want = false;
    int k = -1;
    if (get_bool(c, o, "logprobs", &want) || get_int(c, o, "top_logprobs", 0, GEN_MAX_TOP_LOGPROBS, &k)) return -1;
    if (k >= 0 && !want) return failf(c, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (want) r->top_logprobs = k < 0 ? 0 : k;
    return 0;
}

/* ---- tools ---- */

/* Keeps a string the request's messages point to. */
static char *own(OaiRequest *r, char *s) {
    r->owned = xrealloc(r->owned, sizeof *r->owned * (size_t)(r->n_owned + 1));
    return r->owned[r->n_owned++] = s;
}

/* A JSON value as the template's tojson writes it (Python's json.dumps). */
static char *tojson(const JsonValue *v) {
    Buf b = {0};
    json_append_value(&b, v, ", ", ": ");
    buf_append(&b, "", 0);
    return b.data;
}

/* OpenAI's rule for function names: 1 to 64 of a-z, A-Z, 0-9, '_' and '-'. */
static bool valid_function_name(const JsonValue *v) {
    if (!v || v->type != JSON_STRING || v->string_len == 0 || v->string_len > 64) return false;
    for (size_t i = 0; i < v->string_len; i++) {
        char ch = v->string[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* One entry of "tools": {"type": "function", "function": {"name", "description"?, "parameters"?}}. */
static int get_tool(Ctx *c, const JsonValue *t, size_t i, OaiRequest *r) {
    char param[64];
    snprintf(param, sizeof param, "tools[%zu]", i);
    if (t->type != JSON_OBJECT) return failf(c, param, "'%s' must be an object, got %s", param, type_name(t));
    const JsonValue *type = field(t, "type"), *fn = field(t, "function");
    if (type && (type->type != JSON_STRING || strcmp(type->string, "function") != 0))
        return failf(c, param, "'%s.type' must be \"function\"", param);
    snprintf(param, sizeof param, "tools[%zu].function", i);
    if (!fn || fn->type != JSON_OBJECT) return failf(c, param, "'%s' must be an object with the function's name", param);
    const JsonValue *name = field(fn, "name"), *desc = field(fn, "description"), *params = field(fn, "parameters");
    snprintf(param, sizeof param, "tools[%zu].function.name", i);
    if (!valid_function_name(name))
        return failf(c, param, "'%s' must be a function name: 1 to 64 letters, digits, '_' or '-'", param);
    for (int k = 0; k < r->n_tools; k++)
        if (strcmp(json_get(r->functions[k], "name")->string, name->string) == 0)
            return failf(c, param, "'%s': the function '%s' is listed twice", param, name->string);
    snprintf(param, sizeof param, "tools[%zu].function.description", i);
    if (desc && desc->type != JSON_STRING) return failf(c, param, "'%s' must be a string, got %s", param, type_name(desc));
    snprintf(param, sizeof param, "tools[%zu].function.parameters", i);
    if (params && params->type != JSON_OBJECT)
        return failf(c, param, "'%s' must be a JSON schema object, got %s", param, type_name(params));
    r->functions[r->n_tools] = fn;
    r->tools[r->n_tools++] = tojson(t);
    return 0;
}

/* "tool_choice": "none", "auto", "required" or {"type": "function", "function": {"name": ...}}. */
static int get_tool_choice(Ctx *c, const JsonValue *o, OaiRequest *r) {
    const JsonValue *v = field(o, "tool_choice");
    r->tool_choice = OAI_TOOLS_AUTO;
    if (!v) return 0;
    if (v->type == JSON_STRING) {
        if (strcmp(v->string, "none") == 0) r->tool_choice = OAI_TOOLS_NONE;
        else if (strcmp(v->string, "required") == 0) r->tool_choice = OAI_TOOLS_REQUIRED;
        else if (strcmp(v->string, "auto") != 0)
            return failf(c, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function, got '%s'", v->string);
    } else {
        const JsonValue *fn = v->type == JSON_OBJECT ? field(v, "function") : NULL;
        const JsonValue *name = fn && fn->type == JSON_OBJECT ? field(fn, "name") : NULL;
        if (!name || name->type != JSON_STRING)
            return failf(c, "tool_choice", "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        r->tool_choice = OAI_TOOLS_FUNCTION;
        r->tool_choice_index = -1;
        for (int k = 0; k < r->n_tools; k++)
            if (strcmp(json_get(r->functions[k], "name")->string, name->string) == 0) r->tool_choice_index = k;
        if (r->tool_choice_index < 0)
            return failf(c, "tool_choice", "'tool_choice' names the function '%s', which is not in 'tools'", name->string);
    }
    if (r->n_tools == 0 && (r->tool_choice == OAI_TOOLS_REQUIRED || r->tool_choice == OAI_TOOLS_FUNCTION))
        return failf(c, "tool_choice", "'tool_choice' asks for a tool call but 'tools' lists none");
    return 0;
}

static int get_tools(Ctx *c, const JsonValue *o, OaiRequest *r) {
    const JsonValue *v = field(o, "tools");
    if (v && v->type != JSON_ARRAY) return failf(c, "tools", "'tools' must be an array of tools, got %s", type_name(v));
    size_t n = v ? v->n_items : 0;
    r->functions = xcalloc(n ? n : 1, sizeof *r->functions);
    r->tools = xcalloc(n ? n : 1, sizeof *r->tools);
    for (size_t i = 0; i < n; i++)
        if (get_tool(c, &v->items[i], i, r)) return -1;
    return get_tool_choice(c, o, r);
}

/* An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]. */
static int get_tool_calls(Ctx *c, const JsonValue *m, size_t i, OaiRequest *r) {
    const JsonValue *v = field(m, "tool_calls");
    char param[80];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
    if (!v) return 0;
    if (v->type != JSON_ARRAY) return failf(c, param, "'%s' must be an array, got %s", param, type_name(v));
    ChatToolCall *calls = xcalloc(v->n_items ? v->n_items : 1, sizeof *calls);
    r->messages[i].tool_calls = calls;
    r->messages[i].n_tool_calls = (int)v->n_items;
    for (size_t k = 0; k < v->n_items; k++) {
        const JsonValue *fn = v->items[k].type == JSON_OBJECT ? field(&v->items[k], "function") : NULL;
        const JsonValue *name = fn && fn->type == JSON_OBJECT ? field(fn, "name") : NULL;
        const JsonValue *args = name ? field(fn, "arguments") : NULL;
        snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", i, k);
        if (!name || name->type != JSON_STRING || (args && args->type != JSON_STRING && args->type != JSON_OBJECT))
            return failf(c, param, "'%s' must be {\"function\": {\"name\": string, \"arguments\": string}}", param);
        calls[k].name = name->string;
        calls[k].arguments = !args ? "{}" : args->type == JSON_STRING ? args->string : own(r, tojson(args));
    }
    return 0;
}

/* What an assistant message carries besides its text: tool calls and reasoning. */
static int get_assistant_extras(Ctx *c, const JsonValue *m, size_t i, OaiRequest *r) {
    if (strcmp(r->messages[i].role, "assistant") != 0) return 0;
    const JsonValue *rc = field(m, "reasoning_content");
    char param[80];
    snprintf(param, sizeof param, "messages[%zu].reasoning_content", i);
    if (rc && rc->type != JSON_STRING) return failf(c, param, "'%s' must be a string, got %s", param, type_name(rc));
    r->messages[i].reasoning_content = rc ? rc->string : NULL;
    return get_tool_calls(c, m, i, r);
}

bool oai_tools_shown(const OaiRequest *r) { return r->n_tools > 0 && r->tool_choice != OAI_TOOLS_NONE; }

void oai_reply_prefix(const OaiRequest *r, Buf *out) {
    if (r->tool_choice == OAI_TOOLS_REQUIRED) buf_puts(out, "<tool_call>\n");
    if (r->tool_choice == OAI_TOOLS_FUNCTION)
        buf_printf(out, "<tool_call>\n{\"name\": \"%s\", \"arguments\": ",
                   json_get(r->functions[r->tool_choice_index], "name")->string);
}

/* A message's content: a string, null, or an array of {"type":"text","text":...} parts. */
static int get_content(Ctx *c, const JsonValue *m, size_t i, OaiRequest *r) {
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    const JsonValue *v = field(m, "content");
    ChatMessage *msg = &r->messages[i];
    if (!v) {
        if (strcmp(msg->role, "assistant") != 0) return failf(c, param, "'%s' is missing", param);
        msg->content = "";
        return 0;
    }
    if (v->type == JSON_STRING) {
        msg->content = v->string;
        return 0;
    }
    if (v->type != JSON_ARRAY) return failf(c, param, "'%s' must be a string or an array of parts, got %s", param, type_name(v));
    Buf text = {0};
    buf_append(&text, "", 0);
    r->contents[i] = text.data; /* owned from here, even if a part is bad */
    for (size_t k = 0; k < v->n_items; k++) {
        const JsonValue *part = &v->items[k], *type = field(part, "type"), *t = field(part, "text");
        if (part->type != JSON_OBJECT || !type || type->type != JSON_STRING || strcmp(type->string, "text") != 0 || !t ||
            t->type != JSON_STRING)
            return failf(c, param, "'%s[%zu]': only {\"type\": \"text\", \"text\": ...} parts are supported", param, k);
        if (k) buf_puts(&text, "\n");
        buf_append(&text, t->string, t->string_len);
        r->contents[i] = text.data;
    }
    msg->content = text.data;
    return 0;
}

static int get_messages(Ctx *c, const JsonValue *o, OaiRequest *r) {
    const JsonValue *v = field(o, "messages");
    if (!v) return failf(c, "messages", "'messages' is missing");
    if (v->type != JSON_ARRAY || v->n_items == 0)
        return failf(c, "messages", "'messages' must be a non-empty array, got %s", v->type == JSON_ARRAY ? "an empty one" : type_name(v));
    r->messages = xcalloc(v->n_items, sizeof *r->messages);
    r->contents = xcalloc(v->n_items, sizeof *r->contents);
    r->n_messages = (int)v->n_items;
    for (size_t i = 0; i < v->n_items; i++) {
        const JsonValue *m = &v->items[i], *role = field(m, "role");
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (m->type != JSON_OBJECT) return failf(c, param, "'%s' must be an object, got %s", param, type_name(m));
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role || role->type != JSON_STRING) return failf(c, param, "'%s' must be a string", param);
        const char *name = role->string;
        if (strcmp(name, "developer") == 0) name = "system"; /* OpenAI's newer name for it */
        if (strcmp(name, "system") && strcmp(name, "user") && strcmp(name, "assistant") && strcmp(name, "tool"))
            return failf(c, param, "'%s' must be system, developer, user, assistant or tool, got '%s'", param, role->string);
        r->messages[i].role = name;
        if (get_content(c, m, i, r) || get_assistant_extras(c, m, i, r)) return -1;
    }
    const ChatMessage *last = &r->messages[r->n_messages - 1];
    r->continue_final = strcmp(last->role, "assistant") == 0 && last->n_tool_calls == 0;
    return 0;
}

/* A tool's "parameters" schema, or any object when it has none. */
static void append_parameters(Buf *b, const JsonValue *fn) {
    const JsonValue *p = field(fn, "parameters");
    if (p) json_append_value(b, p, ",", ":");
    else buf_puts(b, "{\"type\":\"object\"}");
}

/* The constraint for tool_choice required or a named function. loose: the
 * arguments as any object (for parameters the grammar cannot enforce). */
static bool tool_constraint(const OaiRequest *r, Buf *schema, const char **suffix, bool loose) {
    if (r->tool_choice == OAI_TOOLS_FUNCTION) {
        if (loose) buf_puts(schema, "{\"type\":\"object\"}");
        else append_parameters(schema, r->functions[r->tool_choice_index]);
        *suffix = "}\n</tool_call>";
        return true;
    }
    if (r->tool_choice != OAI_TOOLS_REQUIRED) return false;
    buf_puts(schema, "{\"type\":\"object\",\"properties\":{\"name\":{\"enum\":[");
    for (int i = 0; i < r->n_tools; i++) {
        const JsonValue *name = json_get(r->functions[i], "name");
        if (i) buf_puts(schema, ",");
        json_append_string(schema, name->string, name->string_len);
    }
    buf_puts(schema, "]},\"arguments\":");
    if (r->n_tools == 1 && !loose) append_parameters(schema, r->functions[0]);
    else buf_puts(schema, "{\"type\":\"object\"}");
    buf_puts(schema, "},\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}");
    *suffix = "\n</tool_call>";
    return true;
}

bool oai_tool_constraint(const OaiRequest *r, Buf *schema, const char **suffix) {
    return tool_constraint(r, schema, suffix, false);
}

/* The grammar of schema (JSON Schema text) then suffix; NULL with err. */
static Grammar *compile_schema(const Buf *schema, const char *suffix, char *err) {
    JsonValue *js = json_parse(schema->data, schema->len, err);
    Grammar *g = js ? grammar_create(NULL, js, suffix, err) : NULL;
    json_free(js);
    return g;
}

/* tool_choice required or a named function: the grammar that makes the reply
 * after oai_reply_prefix a call. A tool's parameters with a keyword the
 * grammar does not support still get a call whose arguments are an object. */
static int get_tool_grammar(Ctx *c, OaiRequest *r) {
    Buf schema = {0};
    const char *suffix = NULL;
    char err[ERR_MAX];
    if (!tool_constraint(r, &schema, &suffix, false)) return 0;
    if (r->grammar) {
        buf_free(&schema);
        return failf(c, "response_format", "'response_format' and 'tool_choice' %s both constrain the reply: send one of them",
                     r->tool_choice == OAI_TOOLS_REQUIRED ? "\"required\"" : "naming a function");
    }
    if (!(r->grammar = compile_schema(&schema, suffix, err))) {
        schema.len = 0;
        tool_constraint(r, &schema, &suffix, true);
        r->grammar = compile_schema(&schema, suffix, err);
    }
    buf_free(&schema);
    return r->grammar ? 0 : failf(c, "tools", "the tools cannot be enforced: %s", err);
}

/* Token ids of a prompt given as [1, 2, 3]. */
static int get_prompt_ids(Ctx *c, const JsonValue *a, int vocab_size, OaiRequest *r) {
    r->prompt_ids = xmalloc(sizeof(int32_t) * (a->n_items ? a->n_items : 1));
    for (size_t i = 0; i < a->n_items; i++) {
        const JsonValue *x = &a->items[i];
        if (x->type != JSON_NUMBER || x->number != floor(x->number) || x->number < 0 || x->number >= vocab_size)
            return failf(c, "prompt", "'prompt[%zu]' must be a token id from 0 to %d", i, vocab_size - 1);
        r->prompt_ids[r->n_prompt_ids++] = (int32_t)x->number;
    }
    return 0;
}

static int get_prompt(Ctx *c, const JsonValue *o, int vocab_size, OaiRequest *r) {
    const JsonValue *v = field(o, "prompt");
    if (!v) return failf(c, "prompt", "'prompt' is missing");
    if (v->type == JSON_ARRAY && v->n_items == 1 && v->items[0].type != JSON_NUMBER) v = &v->items[0]; /* ["text"], [[ids]] */
    if (v->type == JSON_STRING) {
        r->prompt = v->string;
        r->prompt_len = v->string_len;
        return 0;
    }
    if (v->type != JSON_ARRAY) return failf(c, "prompt", "'prompt' must be a string or an array of token ids, got %s", type_name(v));
    if (v->n_items == 0) return failf(c, "prompt", "'prompt' is empty");
    if (v->items[0].type == JSON_STRING || v->items[0].type == JSON_ARRAY)
        return failf(c, "prompt", "'prompt' holds %zu prompts; this server answers one per request", v->n_items);
    return get_prompt_ids(c, v, vocab_size, r);
}

static int get_template_kwargs(Ctx *c, const JsonValue *o, OaiRequest *r) {
    r->enable_thinking = true;
    const JsonValue *k = field(o, "chat_template_kwargs");
    if (!k) return 0;
    if (k->type != JSON_OBJECT)
        return failf(c, "chat_template_kwargs", "'chat_template_kwargs' must be an object, got %s", type_name(k));
    return get_bool(c, k, "enable_thinking", &r->enable_thinking);
}

int oai_parse_request(OaiRequest *r, OaiKind kind, const char *body, size_t len, int vocab_size, char *err,
                      char *param) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    Ctx c = {err, param};
    param[0] = '\0';
    char jerr[ERR_MAX];
    if (!(r->doc = json_parse(body, len, jerr))) return failf(&c, "", "the body is not valid JSON: %s", jerr);
    const JsonValue *o = r->doc;
    if (o->type != JSON_OBJECT) return failf(&c, "", "the body must be a JSON object, got %s", type_name(o));
    const JsonValue *model = field(o, "model");
    if (model && model->type != JSON_STRING) return failf(&c, "model", "'model' must be a string, got %s", type_name(model));
    r->model = model ? model->string : NULL;
    if (get_sampling(&c, o, r) || get_max_tokens(&c, o, r) || get_stop(&c, o, r) || get_stream(&c, o, r) ||
        get_logprobs(&c, o, r) || get_bool(&c, o, "ignore_eos", &r->ignore_eos))
        return -1;
    if (get_response_format(&c, o, r) || get_logit_bias(&c, o, vocab_size, r) || get_choices(&c, o, r)) return -1;
    if (kind == OAI_CHAT)
        return get_messages(&c, o, r) || get_template_kwargs(&c, o, r) || get_tools(&c, o, r) || get_tool_grammar(&c, r) ? -1 : 0;
    r->parse_special = true;
    return get_bool(&c, o, "parse_special", &r->parse_special) || get_prompt(&c, o, vocab_size, r) ? -1 : 0;
}

void oai_request_free(OaiRequest *r) {
    for (int i = 0; r->contents && i < r->n_messages; i++) free(r->contents[i]);
    for (int i = 0; r->messages && i < r->n_messages; i++) free((void *)r->messages[i].tool_calls);
    for (int i = 0; i < r->n_tools; i++) free(r->tools[i]);
    for (int i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->tools);
    free(r->functions);
    free(r->owned);
    free(r->contents);
    free(r->messages);
    free(r->prompt_ids);
    grammar_free(r->grammar);
    free(r->bias_ids), free(r->bias);
    json_free(r->doc);
    memset(r, 0, sizeof *r);
}

/* ---- writing ------------------------------------------------------------------------ */

static void append_str(Buf *b, const char *s) { json_append_string(b, s, strlen(s)); }

void oai_error_json(Buf *out, int status, const char *message, const char *param) {
    const char *type = "invalid_request_error", *code = NULL;
    switch (status) {
    case 401: type = "authentication_error"; code = "invalid_api_key"; break;
    case 404: code = param && strcmp(param, "model") == 0 ? "model_not_found" : "not_found"; break;
    case 405: code = "method_not_allowed"; break;
    case 408: type = "timeout_error"; break;
    case 413: code = "request_too_large"; break;
    case 429: type = "rate_limit_error"; code = "rate_limit_exceeded"; break;
    case 503: type = "unavailable_error"; code = "server_busy"; break;
    default: if (status >= 500) type = "server_error";
    }
    buf_puts(out, "{\"error\":{\"message\":");
    append_str(out, message);
    buf_puts(out, ",\"type\":");
    append_str(out, type);
    buf_puts(out, ",\"param\":");
    if (param && *param) append_str(out, param);
    else buf_puts(out, "null");
    buf_puts(out, ",\"code\":");
    if (code) append_str(out, code);
    else buf_puts(out, "null");
    buf_puts(out, "}}");
}

static void append_head(Buf *b, const OaiRequest *q, const OaiReply *a, bool chunk) {
    buf_puts(b, "{\"id\":");
    append_str(b, a->id);
    buf_printf(b, ",\"object\":\"%s\",\"created\":%ld,\"model\":",
               q->kind == OAI_COMPLETION ? "text_completion" : chunk ? "chat.completion.chunk" : "chat.completion",
               a->created);
    append_str(b, a->model);
}

/* A token's text and bytes for logprobs (special tokens as their text). */
static void append_token(Buf *b, const Tokenizer *tok, int32_t id, bool with_bytes) {
    char piece[512];
    int n = tokenizer_token_bytes(tok, id, true, piece, sizeof piece);
    if (n < 0) n = 0;
    buf_puts(b, "\"token\":");
    json_append_string(b, piece, (size_t)n);
    if (!with_bytes) return;
    buf_puts(b, ",\"bytes\":[");
    for (int i = 0; i < n; i++) buf_printf(b, "%s%u", i ? "," : "", (unsigned char)piece[i]);
    buf_puts(b, "]");
}

static void append_chat_logprobs(Buf *b, const Tokenizer *tok, const GenLogprob *lp, int n_lp) {
    buf_puts(b, "{\"content\":[");
    for (int i = 0; i < n_lp; i++) {
        buf_puts(b, i ? ",{" : "{");
        append_token(b, tok, lp[i].token, true);
        buf_puts(b, ",\"logprob\":");
        json_append_number(b, lp[i].logprob);
        buf_puts(b, ",\"top_logprobs\":[");
        for (int k = 0; k < lp[i].n_top; k++) {
            buf_puts(b, k ? ",{" : "{");
            append_token(b, tok, lp[i].top[k], true);
            buf_puts(b, ",\"logprob\":");
            json_append_number(b, lp[i].top_logprob[k]);
            buf_puts(b, "}");
        }
        buf_puts(b, "]}");
    }
    buf_puts(b, "]}");
}

/* The legacy completions form: parallel arrays, and {token: logprob} maps. */
static void append_completion_logprobs(Buf *b, const Tokenizer *tok, const GenLogprob *lp, int n_lp) {
    char piece[512];
    buf_puts(b, "{\"tokens\":[");
    size_t offset = 0;
    Buf offsets = {0};
    for (int i = 0; i < n_lp; i++) {
        int n = tokenizer_token_bytes(tok, lp[i].token, true, piece, sizeof piece);
        if (i) buf_puts(b, ",");
        json_append_string(b, piece, n > 0 ? (size_t)n : 0);
        buf_printf(&offsets, "%s%zu", i ? "," : "", offset);
        offset += n > 0 ? (size_t)n : 0;
    }
    buf_puts(b, "],\"token_logprobs\":[");
    for (int i = 0; i < n_lp; i++) {
        if (i) buf_puts(b, ",");
        json_append_number(b, lp[i].logprob);
    }
    buf_puts(b, "],\"top_logprobs\":[");
    for (int i = 0; i < n_lp; i++) {
        buf_puts(b, i ? ",{" : "{");
        for (int k = 0; k < lp[i].n_top; k++) {
            int n = tokenizer_token_bytes(tok, lp[i].top[k], true, piece, sizeof piece);
            if (k) buf_puts(b, ",");
            json_append_string(b, piece, n > 0 ? (size_t)n : 0);
            buf_puts(b, ":");
            json_append_number(b, lp[i].top_logprob[k]);
        }
        buf_puts(b, "}");
    }
    buf_printf(b, "],\"text_offset\":[%s]}", offsets.data ? offsets.data : "");
    buf_free(&offsets);
}

static void append_logprobs(Buf *b, const OaiRequest *q, const OaiReply *a, const GenLogprob *lp, int n_lp) {
    buf_puts(b, ",\"logprobs\":");
    if (q->top_logprobs < 0) buf_puts(b, "null");
    else if (q->kind == OAI_CHAT) append_chat_logprobs(b, a->tok, lp, n_lp);
    else append_completion_logprobs(b, a->tok, lp, n_lp);
}

static void append_finish(Buf *b, const char *finish_reason) {
    buf_puts(b, ",\"finish_reason\":");
    if (finish_reason) append_str(b, finish_reason);
    else buf_puts(b, "null");
}

static double per_second(int n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0; }

void oai_usage_members(Buf *out, const GenResult *res) {
    int computed = res->n_prompt - res->n_cached;
    buf_printf(out,
               "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
               "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
               res->n_prompt, res->n_generated, res->n_prompt + res->n_generated, res->n_cached);
    double prompt_ms = res->t_prefill && res->t_begin ? res->t_prefill - res->t_begin : 0;
    double gen_ms = res->t_last && res->t_prefill ? res->t_last - res->t_prefill : 0;
    buf_printf(out, ",\"timings\":{\"cache_n\":%d,\"prompt_n\":%d,\"prompt_ms\":", res->n_cached, computed);
    json_append_number(out, prompt_ms);
    buf_puts(out, ",\"prompt_per_token_ms\":");
    json_append_number(out, computed > 0 ? prompt_ms / computed : 0);
    buf_puts(out, ",\"prompt_per_second\":");
    json_append_number(out, per_second(computed, prompt_ms));
    buf_printf(out, ",\"predicted_n\":%d,\"predicted_ms\":", res->n_generated);
    json_append_number(out, gen_ms);
    buf_puts(out, ",\"predicted_per_token_ms\":");
    json_append_number(out, res->n_generated > 0 ? gen_ms / res->n_generated : 0);
    buf_puts(out, ",\"predicted_per_second\":");
    json_append_number(out, per_second(res->n_generated, gen_ms));
    if (res->decode_steps > 0 || res->charged_prompt_ms > 0) { /* an engine that batches charged each its share */
        buf_puts(out, ",\"prompt_charged_ms\":");
        json_append_number(out, res->charged_prompt_ms);
        buf_puts(out, ",\"predicted_charged_ms\":");
        json_append_number(out, res->charged_decode_ms);
        buf_puts(out, ",\"predicted_charged_per_token_ms\":");
        json_append_number(out, res->decode_steps > 0 ? res->charged_decode_ms / res->decode_steps : 0);
        buf_puts(out, ",\"batch_mean\":");
        json_append_number(out, res->decode_steps > 0 ? (double)res->batch_sum / res->decode_steps : 0);
    }
    buf_puts(out, "}");
}

const char *oai_finish_reason(const OaiReply *a, const GenResult *res) {
    bool called = a->parsed && a->parsed->n_calls > 0;
    return called && res->finish_reason && strcmp(res->finish_reason, "stop") == 0 ? "tool_calls" : res->finish_reason;
}

/* "call_<the request's id without its prefix>_<index>" (choice > 0:
 * "call_<id>_<choice>_<index>"): unique per server run. */
static void append_call_id(Buf *b, const OaiReply *a, int choice, int index) {
    const char *dash = strchr(a->id, '-');
    buf_printf(b, "\"call_%s_", dash ? dash + 1 : a->id);
    if (choice > 0) buf_printf(b, "%d_", choice);
    buf_printf(b, "%d\"", index);
}

static void append_call(Buf *b, const OaiReply *a, int choice, int index, const ChatReplyCall *call,
                        bool with_arguments) {
    buf_printf(b, "{\"index\":%d,\"id\":", index);
    append_call_id(b, a, choice, index);
    buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
    append_str(b, call->name);
    buf_puts(b, ",\"arguments\":");
    append_str(b, with_arguments ? call->arguments : "");
    buf_puts(b, "}}");
}

/* Choice number choice's message: its text as content, or its parsed reply's parts. */
static void append_message(Buf *b, const OaiReply *a, int choice, const OaiChoice *c) {
    const ChatReply *p = c->parsed;
    buf_puts(b, "{\"role\":\"assistant\",\"content\":");
    if (!p) json_append_string(b, c->text, c->len);
    else if (p->content.len == 0 && p->n_calls > 0) buf_puts(b, "null");
    else json_append_string(b, p->content.data, p->content.len);
    if (p && p->reasoning.len > 0) {
        buf_puts(b, ",\"reasoning_content\":");
        json_append_string(b, p->reasoning.data, p->reasoning.len);
    }
    if (p && p->n_calls > 0) {
        buf_puts(b, ",\"tool_calls\":[");
        for (int i = 0; i < p->n_calls; i++) {
            if (i) buf_puts(b, ",");
            append_call(b, a, choice, i, &p->calls[i], true);
        }
        buf_puts(b, "]");
    }
    buf_puts(b, "}");
}

/* A chat chunk whose delta is members (JSON object members, without braces). */
static void delta_chunk(Buf *out, const OaiRequest *q, const OaiReply *a, const char *members) {
    append_head(out, q, a, true);
    buf_printf(out, ",\"choices\":[{\"index\":%d,\"delta\":{%s},\"logprobs\":null,\"finish_reason\":null}]", a->index,
               members);
    if (q->include_usage) buf_puts(out, ",\"usage\":null");
    buf_puts(out, "}");
}

void oai_reasoning_chunk_json(Buf *out, const OaiRequest *q, const OaiReply *a, const char *text, size_t len) {
    Buf m = {0};
    buf_puts(&m, "\"reasoning_content\":");
    json_append_string(&m, text, len);
    delta_chunk(out, q, a, m.data);
    buf_free(&m);
}

void oai_tool_call_chunks_json(Buf *first, Buf *second, const OaiRequest *q, const OaiReply *a, int index,
                               const ChatReplyCall *call) {
    Buf m = {0};
    buf_puts(&m, "\"tool_calls\":[");
    append_call(&m, a, a->index, index, call, false);
    buf_puts(&m, "]");
    delta_chunk(first, q, a, m.data);
    m.len = 0;
    buf_printf(&m, "\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":", index);
    append_str(&m, call->arguments);
    buf_puts(&m, "}}]");
    delta_chunk(second, q, a, m.data);
    buf_free(&m);
}

/* One element of "choices". */
static void append_choice(Buf *out, const OaiRequest *q, const OaiReply *a, int index, const OaiChoice *c) {
    buf_printf(out, "{\"index\":%d,", index);
    if (q->kind == OAI_CHAT) {
        buf_puts(out, "\"message\":");
        append_message(out, a, index, c);
    } else {
        buf_puts(out, "\"text\":");
        json_append_string(out, c->text, c->len);
    }
    append_logprobs(out, q, a, c->lp, c->n_lp);
    append_finish(out, c->finish_reason);
    buf_puts(out, "}");
}

void oai_response_choices_json(Buf *out, const OaiRequest *q, const OaiReply *a, const OaiChoice *choices, int n,
                               const GenResult *usage) {
    append_head(out, q, a, false);
    buf_puts(out, ",\"choices\":[");
    for (int i = 0; i < n; i++) {
        if (i) buf_puts(out, ",");
        append_choice(out, q, a, i, &choices[i]);
    }
    buf_puts(out, "],");
    oai_usage_members(out, usage);
    buf_puts(out, "}");
}

void oai_response_json(Buf *out, const OaiRequest *q, const OaiReply *a, const char *text, size_t len,
                       const GenLogprob *lp, int n_lp, const GenResult *res) {
    OaiChoice c = {text, len, lp, n_lp, oai_finish_reason(a, res), a->parsed};
    oai_response_choices_json(out, q, a, &c, 1, res);
}

void oai_chunk_json(Buf *out, const OaiRequest *q, const OaiReply *a, const char *role, const char *text, size_t len,
                    const GenLogprob *lp, int n_lp, const char *finish_reason) {
    append_head(out, q, a, true);
    buf_printf(out, ",\"choices\":[{\"index\":%d,", a->index);
    if (q->kind == OAI_CHAT) {
        buf_puts(out, "\"delta\":{");
        if (role) buf_printf(out, "\"role\":\"%s\"%s", role, text ? "," : "");
        if (text) {
            buf_puts(out, "\"content\":");
            json_append_string(out, text, len);
        }
        buf_puts(out, "}");
    } else {
        buf_puts(out, "\"text\":");
        json_append_string(out, text ? text : "", text ? len : 0);
    }
    if (n_lp > 0) append_logprobs(out, q, a, lp, n_lp);
    else buf_puts(out, ",\"logprobs\":null");
    append_finish(out, finish_reason);
    buf_puts(out, "}]");
    if (q->include_usage) buf_puts(out, ",\"usage\":null");
    buf_puts(out, "}");
}

void oai_usage_chunk_json(Buf *out, const OaiRequest *q, const OaiReply *a, const GenResult *res) {
    append_head(out, q, a, true);
    buf_puts(out, ",\"choices\":[],");
    oai_usage_members(out, res);
    buf_puts(out, "}");
}
