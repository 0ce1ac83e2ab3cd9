/* test_soak.c: many streaming clients at once, for a while, against the
 * chat-server of the last chapter that runs requests side by side (III.7):
 * every answer is the one its prompt gets alone (temperature 0), the
 * server's resident memory stays flat after a warm-up, and at the end every
 * KV block is back in the pool and every slot idle.
 *
 * Sized by SOAK_CLIENTS (default 32) and SOAK_SECONDS (default 3): `make
 * test` runs the small one, `make soak` 32 clients for a minute. Loopback
 * only; the clients stop at the deadline and the server with the test. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "servers.h"

#define SOAK_PROMPTS 6
#define SOAK_MAX_CLIENTS 256

/* The prompts: different lengths and max_tokens, some sharing a prefix (so
 * the prefix cache lends blocks under load), one with ignore_eos. */
static const char *const PROMPTS[SOAK_PROMPTS] = {
    "Once upon a time",
    "Tell me about the river and the old bridge under the hills, and the boats that go by every morning",
    "Tell me about the river and the old bridge under the hills, and the ducks",
    "a b c d e f g h i j k l m n o p",
    "Why is the sky blue?",
    "Write one line about a fox.",
};
static const int MAX_TOKENS[SOAK_PROMPTS] = {24, 12, 20, 8, 16, 24};

static void body_for(int k, Buf *b) {
    buf_printf(b, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"temperature\":0,\"max_tokens\":%d,"
                  "\"stream\":true%s}",
               PROMPTS[k], MAX_TOKENS[k], k == 5 ? ",\"ignore_eos\":true" : "");
}

/* One streamed answer's text, or false with why. */
static bool ask(int port, int k, Buf *text, char *why) {
    Buf body = {0};
    body_for(k, &body);
    HttpReply r;
    char finish[32];
    bool ok = http_post(port, "/v1/chat/completions", body.data, &r);
    buf_free(&body);
    if (!ok || r.status != 200) {
        snprintf(why, ERR_MAX, "prompt %d: HTTP %d: %.200s", k, ok ? r.status : 0, ok && r.body ? r.body : "");
        if (ok) http_reply_free(&r);
        return false;
    }
    ok = sse_collect(r.body, text, finish, sizeof finish, why);
    if (ok && !finish[0]) {
        snprintf(why, ERR_MAX, "prompt %d: no finish_reason", k);
        ok = false;
    }
    http_reply_free(&r);
    return ok;
}

typedef struct {
    int port, id;
    double deadline;
    Buf *want;            /* [SOAK_PROMPTS] the solo answers */
    atomic_int *done, *failed, *differ;
    char first[ERR_MAX];  /* this client's first failure */
} Client;

static void *client_main(void *arg) {
    Client *c = arg;
    for (int i = 0; time_now_ms() < c->deadline; i++) {
        int k = (c->id + i) % SOAK_PROMPTS;
        Buf text = {0};
        char why[ERR_MAX] = "";
        if (!ask(c->port, k, &text, why)) {
            if (atomic_fetch_add(c->failed, 1) == 0) snprintf(c->first, sizeof c->first, "%s", why);
        } else if (text.len != c->want[k].len || memcmp(text.data, c->want[k].data, text.len) != 0) {
            if (atomic_fetch_add(c->differ, 1) == 0)
                snprintf(c->first, sizeof c->first, "prompt %d: got '%.80s', alone '%.80s'", k, text.data,
                         c->want[k].data);
        } else {
            atomic_fetch_add(c->done, 1);
        }
        buf_free(&text);
    }
    return NULL;
}

/* The server's resident memory in kB (0 if unknown). */
static long rss_kb(pid_t pid) {
    char path[64], line[256];
    long kb = 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

static int env_int(const char *name, int def, int lo, int hi) {
    const char *v = getenv(name);
    int n = v ? atoi(v) : def;
    return n < lo ? lo : n > hi ? hi : n;
}

/* The last chapter whose engine runs requests side by side. */
static const char *soak_chapter(void) {
    const char *last = NULL;
    FOR_EACH_SERVER_CHAPTER(c) if (!one_at_a_time(c)) last = c;
    return last;
}

TEST(server_soak_many_clients_same_answers_flat_memory) {
    const char *chapter = soak_chapter();
    if (!chapter) {
        test_skip("no chapter with a server that runs requests side by side");
        return;
    }
    if (getenv("SERVER_WRAPPER")) {
        test_skip("under SERVER_WRAPPER the soak would take hours");
        return;
    }
    int n_clients = env_int("SOAK_CLIENTS", 32, 1, SOAK_MAX_CLIENTS), seconds = env_int("SOAK_SECONDS", 3, 1, 3600);
    char conns[16];
    snprintf(conns, sizeof conns, "%d", n_clients + 8);
    const char *args[] = {default_model_path(), "--max-concurrent", "8", "--queue", "256", "--max-connections", conns,
                          "--timeout", "30", NULL};
    ServerProc s;
    if (!server_proc_start(&s, chapter, args)) return;

    /* Alone first: each prompt's answer with nothing else running. */
    Buf want[SOAK_PROMPTS] = {{0}};
    char why[ERR_MAX];
    bool ok = true;
    for (int k = 0; k < SOAK_PROMPTS && ok; k++) {
        ok = ask(s.port, k, &want[k], why);
        CHECK_MSG(ok, "alone: %s", why);
    }
    /* ignore_eos end to end: every one of max_tokens is generated */
    HttpReply r;
    if (ok && http_post(s.port, "/v1/chat/completions",
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"temperature\":0,\"max_tokens\":40,"
                        "\"ignore_eos\":true}", &r)) {
        JsonValue *v = http_reply_json(&r);
        CHECK_EQ_INT((int)json_number_at(v, "usage", "completion_tokens", NULL), 40);
        /* alone, every decode step was its own: charged all of each, a batch of 1 */
        CHECK(json_number_at(v, "timings", "predicted_charged_ms", NULL) > 0);
        CHECK(json_number_at(v, "timings", "predicted_charged_ms", NULL) <=
              json_number_at(v, "timings", "predicted_ms", NULL) + 1e-6);
        CHECK_NEAR(json_number_at(v, "timings", "batch_mean", NULL), 1, 0);
        json_free(v);
        http_reply_free(&r);
    }

    atomic_int done = 0, failed = 0, differ = 0;
    Client *clients = xcalloc((size_t)n_clients, sizeof *clients);
    pthread_t *threads = xcalloc((size_t)n_clients, sizeof *threads);
    double start = time_now_ms(), end = start + seconds * 1000.0;
    int started = 0;
    for (int i = 0; ok && i < n_clients; i++, started++) {
        clients[i] = (Client){.port = s.port, .id = i, .deadline = end, .want = want, .done = &done,
                              .failed = &failed, .differ = &differ};
        if (pthread_create(&threads[i], NULL, client_main, &clients[i]) != 0) break;
    }
    /* Resident memory: the warm-up is the first third; after it, it may not grow. */
    long warm = 0, peak = 0;
    while (ok && time_now_ms() < end) {
        usleep(50000);
        long kb = rss_kb(s.pid);
        if (time_now_ms() < start + (end - start) / 3) warm = kb > warm ? kb : warm;
        else peak = kb > peak ? kb : peak;
    }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < started; i++)
        if (clients[i].first[0]) {
            CHECK_MSG(false, "client %d: %s", i, clients[i].first);
            break;
        }
    int d = atomic_load(&done), f = atomic_load(&failed), x = atomic_load(&differ);
    fprintf(stderr, "    soak: %d clients, %d s: %d answers, %d failed, %d differed; RSS %ld kB after warm-up, peak %ld kB\n",
            started, seconds, d, f, x, warm, peak);
    CHECK_EQ_INT(f, 0);
    CHECK_EQ_INT(x, 0);
    CHECK_MSG(d >= started, "only %d answers from %d clients", d, started);
    /* flat: a leak of a few hundred bytes a request over thousands of them shows. Under a
     * sanitizer resident memory means nothing (ASan keeps freed memory in quarantine, TSan
     * grows its shadow): there LeakSanitizer's verdict at the server's exit, checked below by
     * its exit status, stands in for it. */
    if (test_sanitized())
        fprintf(stderr, "    soak: sanitized build: leaks are LeakSanitizer's to find, not resident memory's\n");
    else
        CHECK_MSG(warm > 0 && peak <= warm + 4096 + warm / 20, "resident memory grew from %ld kB to %ld kB", warm,
                  peak);
    /* and at the end: every block back in the pool (cached ones are free to take), every slot idle */
    CHECK_MSG(wait_pool_empty(s.port, 5000), "KV blocks still in use after the load");
    JsonValue *slots = get_json(s.port, "/v1/slots");
    CHECK_EQ_INT((int)json_number_at(slots, "running", NULL), 0);
    json_free(slots);
    CHECK_EQ_INT(server_proc_stop(&s, SIGTERM), 0);
    for (int k = 0; k < SOAK_PROMPTS; k++) buf_free(&want[k]);
    free(clients);
    free(threads);
}
