/* test_replicas.c: make replicas for real, on loopback. tools/replicas/run.sh
 * starts two of III.7's chat-servers (tiny model) and HAProxy with the
 * repository's config in front; tools/loadgen sends two conversations of
 * three turns, one request at a time (conversation 0's turns, then 1's).
 *
 *   prefix affinity   every turn of a conversation goes to one replica, so
 *                     every later turn finds the earlier ones in its cache
 *   round robin       consecutive requests alternate replicas, so each
 *                     conversation's second turn lands on the replica that
 *                     has not seen its first: almost nothing cached
 *   a replica killed  the next requests go to the other one, the balancer's
 *                     /health stays up, its page marks the replica DOWN, and
 *                     UP again once a server answers on its port
 *
 * Skipped, saying why, when haproxy is not installed (make replicas-deps). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "json.h"
#include "run_loadgen.h"
#include "util.h"

extern char **environ;

#define BLOCK 16   /* chat-server's KV block: the prefix cache keeps whole blocks */

/* ---- processes ------------------------------------------------------------ */

static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

static pid_t spawn(char *const argv[], const char *out_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

/* Waits up to ms for pid to exit: its status, or -1 (then it is killed). */
static int reap(pid_t pid, int ms) {
    int ws;
    for (double end = time_now_ms() + ms; time_now_ms() < end; sleep_ms(20))
        if (waitpid(pid, &ws, WNOHANG) == pid) return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    kill(pid, SIGKILL);
    waitpid(pid, &ws, 0);
    return -1;
}

static bool gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

/* A port nobody listens on now (the kernel's pick; free again when we close it). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
               getsockname(fd, (struct sockaddr *)&a, &len) == 0 ? ntohs(a.sin_port) : -1;
    if (fd >= 0) close(fd);
    return port;
}

/* GET path on 127.0.0.1:port: the status (-1 if none came within 5 s), the body in *body. */
static int http_get(int port, const char *path, Buf *body) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char req[512], tmp[4096];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    Buf all = {0};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, (size_t)n) == n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t got;
        while (poll(&p, 1, 5000) > 0 && (got = read(fd, tmp, sizeof tmp)) > 0) buf_append(&all, tmp, (size_t)got);
    }
    if (fd >= 0) close(fd);
    buf_append(&all, "", 0);
    if (sscanf(all.data, "HTTP/1.%*d %d", &status) != 1) status = -1;
    const char *b = strstr(all.data, "\r\n\r\n");
    if (body) buf_puts(body, b ? b + 4 : "");
    buf_free(&all);
    return status;
}

/* ---- the replicas ------------------------------------------------------------ */

typedef struct {
    pid_t run;                 /* run.sh */
    int port;                  /* the balancer's */
    char name[2][32];          /* the replicas' names, their ports and pids */
    int replica_port[2];
    pid_t pid[2];
} Replicas;

static const char *tiny_model(void) {
    static char path[512];
    snprintf(path, sizeof path, "%s/tiny-q8_0.gguf", test_models_dir());
    return path;
}

/* Starts run.sh with this balance; false (the test failed) if it did not say
 * "balancer" within 30 s. */
static bool replicas_start(Replicas *r, const char *balance) {
    memset(r, 0, sizeof *r);
    char server[512], dir[512], port[16], out[520];
    snprintf(server, sizeof server, "%s/III.7/chat-server", test_build_dir());
    snprintf(dir, sizeof dir, "%s", test_tmp_path(balance));
    snprintf(out, sizeof out, "%s.out", dir);
    r->port = free_port();
    snprintf(port, sizeof port, "%d", r->port);
    char *argv[] = {"tools/replicas/run.sh", "--balance", (char *)balance, "--port", port, "--dir", dir,
                    server, (char *)tiny_model(), "2", NULL};
    r->run = spawn(argv, out);
    CHECK_MSG(r->run > 0, "cannot run tools/replicas/run.sh");
    if (r->run <= 0) return false;
    int n = 0;
    for (double end = time_now_ms() + 30000; time_now_ms() < end; sleep_ms(50)) {
        size_t len;
        char *text = file_read_all(out, &len, NULL);
        bool up = text && strstr(text, "\nbalancer http://");
        n = 0;
        for (char *line = text; up && line && *line && n < 2; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
            int pid;
            if (sscanf(line, "replica %31s http://127.0.0.1:%d pid %d", r->name[n], &r->replica_port[n], &pid) == 3)
                r->pid[n++] = pid;
        }
        if (!up && (text && strstr(text, "run.sh:"))) up = true; /* it failed: say why below */
        free(text);
        if (up) break;
    }
    CHECK_MSG(n == 2, "run.sh --balance %s did not start two replicas and the balancer (see %s)", balance, out);
    return n == 2;
}

/* Ctrl-C's twin: SIGTERM stops run.sh, the balancer and the replicas. */
static void replicas_stop(Replicas *r) {
    if (r->run <= 0) return;
    kill(r->run, SIGTERM);
    int status = reap(r->run, 10000);
    CHECK_MSG(status == 128 + SIGTERM || status == 143, "run.sh ended with %d after SIGTERM", status);
    for (int i = 0; i < 2; i++) CHECK_MSG(!r->pid[i] || gone(r->pid[i]), "replica %s still runs", r->name[i]);
    r->run = 0;
}

/* ---- the conversations ---------------------------------------------------------- */

/* Two conversations of three turns (one request at a time), 24-word system
 * prompts, 6-word user messages, 16 tokens per answer. */
static Ran conversations(const Replicas *r, int seed, int turns) {
    char args[512];
    snprintf(args, sizeof args, "--url http://127.0.0.1:%%d --conversations 2 --turns %d -c 1 --no-probe "
             "--system-tokens 24 --prompt-tokens 6 --output-tokens 16 --ignore-eos --seed %d --json --samples",
             turns, seed);
    Ran ran = loadgen(args, r->port);
    CHECK_MSG(ran.status == 0 && per_request(&ran), "loadgen exit %d: %s%s", ran.status, ran.err, ran.out);
    return ran;
}

typedef struct {
    const char *replica;
    int prompt, cached;
} Turn;

/* Turn t (from 0) of conversation c. */
static Turn turn_of(const Ran *ran, int turns, int c, int t) {
    const JsonValue *req = per_request(ran);
    size_t i = (size_t)(c * turns + t);
    Turn x = {"", -1, -1};
    if (!req || i >= req->n_items) return x;
    const JsonValue *q = &req->items[i];
    const char *name = json_str_key(q, "replica");
    x.replica = name ? name : "";
    x.prompt = (int)json_num_path(q, "usage_prompt_tokens");
    x.cached = (int)json_num_path(q, "usage_cached_tokens");
    return x;
}

/* On the PATH, or in /usr/sbin (Debian's place, not on a user's PATH), as run.sh looks. */
static bool haproxy_missing(void) {
    for (int i = 0; i < 2; i++) {
        char *argv[] = {i ? "/usr/sbin/haproxy" : "haproxy", "-v", NULL};
        pid_t pid = spawn(argv, test_tmp_path("haproxy-v.out"));
        if (pid > 0 && reap(pid, 10000) == 0) return false;
    }
    return true;
}

/* The balancer's page as CSV: is the replica's row marked status? */
static bool replica_status(int port, const char *name, const char *status) {
    Buf csv = {0};
    http_get(port, "/haproxy;csv", &csv);
    char row[64];
    snprintf(row, sizeof row, "\nreplicas,%s,", name);
    const char *p = csv.data ? strstr(csv.data, row) : NULL;
    const char *end = p ? strchr(p + 1, '\n') : NULL;
    bool yes = false;
    if (p) {
        char want[32];
        snprintf(want, sizeof want, ",%s,", status);
        const char *hit = strstr(p + 1, want);
        yes = hit && (!end || hit < end);
    }
    buf_free(&csv);
    return yes;
}

static bool wait_status(int port, const char *name, const char *status, int ms) {
    for (double end = time_now_ms() + ms; time_now_ms() < end; sleep_ms(100))
        if (replica_status(port, name, status)) return true;
    return false;
}

/* The replicas with this balance, or false when the test is skipped or failed. */
static bool replicas_up(Replicas *r, const char *balance) {
    memset(r, 0, sizeof *r);
    if (haproxy_missing()) {
        test_skip("haproxy is not installed (make replicas-deps installs it from Debian)");
        return false;
    }
    if (replicas_start(r, balance)) return true;
    replicas_stop(r);
    return false;
}

TEST(replicas_prefix_affinity_keeps_conversations_cached) {
    Replicas r;
    if (!replicas_up(&r, "prefix")) return;
    Ran ran = conversations(&r, 1, 3);
    /* the replica conversation 0 went to: the one to kill below */
    int victim = !strcmp(turn_of(&ran, 3, 0, 0).replica, r.name[0]) ? 0 : 1, other = 1 - victim;
    for (int c = 0; c < 2 && per_request(&ran); c++) {
        Turn first = turn_of(&ran, 3, c, 0);
        CHECK_MSG(first.replica[0], "no X-Replica header: is this the repository's haproxy.cfg?");
        for (int t = 1; t < 3; t++) {
            Turn x = turn_of(&ran, 3, c, t);
            CHECK_MSG(!strcmp(x.replica, first.replica), "conversation %d: turn 1 on %s, turn %d on %s", c,
                      first.replica, t + 1, x.replica);
            /* the first turn's prompt was cached whole, but for its last partial block */
            CHECK_MSG(x.cached >= first.prompt - BLOCK, "conversation %d turn %d: %d of %d prompt tokens cached, "
                      "turn 1 had %d", c, t + 1, x.cached, x.prompt, first.prompt);
        }
    }
    ran_free(&ran);

    /* One replica dies (SIGKILL): the next conversations all go to the other. */
    kill(r.pid[victim], SIGKILL);
    Ran after = conversations(&r, 2, 2);
    for (int c = 0; c < 2 && per_request(&after); c++)
        for (int t = 0; t < 2; t++)
            CHECK_MSG(!strcmp(turn_of(&after, 2, c, t).replica, r.name[other]), "conversation %d turn %d on '%s' after "
                      "%s died", c, t + 1, turn_of(&after, 2, c, t).replica, r.name[victim]);
    CHECK_EQ_INT(http_get(r.port, "/health", NULL), 200);
    CHECK_MSG(wait_status(r.port, r.name[victim], "DOWN", 8000), "HAProxy's page does not mark %s DOWN",
              r.name[victim]);
    CHECK_EQ_INT(http_get(r.port, "/health", NULL), 200);

    /* A server answering on its port again: the health checks put it back. */
    char server[512], bind[64];
    snprintf(server, sizeof server, "%s/III.7/chat-server", test_build_dir());
    snprintf(bind, sizeof bind, "127.0.0.1:%d", r.replica_port[victim]);
    char *argv[] = {server, "--bind", bind, (char *)tiny_model(), NULL};
    pid_t back = spawn(argv, test_tmp_path("back.log"));
    CHECK_MSG(wait_status(r.port, r.name[victim], "UP", 8000), "HAProxy does not put %s back UP", r.name[victim]);
    if (back > 0) {
        kill(back, SIGTERM);
        reap(back, 10000);
    }
    r.pid[victim] = 0;
    ran_free(&after);
    replicas_stop(&r);
}

TEST(replicas_round_robin_loses_the_cache) {
    Replicas r;
    if (!replicas_up(&r, "roundrobin")) return;
    /* One request at a time, and turns 1 and 2 of a conversation are consecutive
     * requests: round robin sends them to different replicas. */
    Ran ran = conversations(&r, 1, 3);
    for (int c = 0; c < 2 && per_request(&ran); c++) {
        Turn first = turn_of(&ran, 3, c, 0), second = turn_of(&ran, 3, c, 1);
        CHECK_MSG(first.replica[0] && strcmp(first.replica, second.replica), "conversation %d: turns 1 and 2 both on '%s'",
                  c, first.replica);
        /* what every chat shares ("<|im_start|>system\n") at most: less than a block */
        CHECK_MSG(second.cached < BLOCK && second.cached < first.prompt - BLOCK,
                  "conversation %d turn 2: %d prompt tokens cached on a replica that never saw turn 1", c, second.cached);
    }
    ran_free(&ran);
    replicas_stop(&r);
}
