/* fake_server.h: a stand-in for chat-server in loadgen's tests. It speaks just
 * enough of the OpenAI API (GET /v1/models, streaming POST /v1/chat/completions,
 * and a JSON answer with usage to loadgen's non-streamed probes)
 * on 127.0.0.1, one thread per connection, with fixed delays and a fixed number
 * of content chunks, so the figures loadgen reports have known lower bounds and
 * exact totals; switches make it misbehave in the ways a real server can. */
#ifndef FAKE_SERVER_H
#define FAKE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define FAKE_MAX_POSTS 64
#define FAKE_MAX_CONNS 128
#define FAKE_MODEL "fake-model"

typedef struct {
    /* Behaviour: set before fake_server_start. */
    int chunks;           /* content chunks per answer ("t0 ", "t1 ", ...) */
    int first_ms;         /* delay before the first content chunk */
    int token_ms;         /* delay before each later one */
    int slow_every;       /* every k-th POST (in arrival order) waits slow_first_ms instead */
    int slow_first_ms;
    bool no_usage;        /* no final usage chunk */
    bool chunked;         /* Transfer-Encoding: chunked (else the body ends with the connection) */
    bool split_events;    /* each event is written in two pieces, 1 ms apart */
    int drop_every;       /* every k-th POST closes the connection after half its chunks */
    bool no_finish;       /* finish_reason stays null */
    bool no_done;         /* no data: [DONE] */
    int status;           /* non-zero: every POST gets this HTTP status and a JSON error */
    int stall_ms;         /* waits this long (or until the client leaves) before answering */
    int tokens_per_word;  /* usage.prompt_tokens: this many per word of every message (0: 1)... */
    int template_tokens;  /* ...and this many more per message */

    /* What it saw: read after fake_server_stop. */
    int port;
    int posts, dropped, max_active;  /* streamed POSTs */
    int probes;                      /* POSTs without "stream": true (answered at once, in JSON) */
    char *prompts[FAKE_MAX_POSTS];   /* each streamed POST's last message, in arrival order */
    char *previous[FAKE_MAX_POSTS];  /* the message before it ("" when none) */
    int n_messages[FAKE_MAX_POSTS];
    int max_tokens[FAKE_MAX_POSTS];
    bool include_usage[FAKE_MAX_POSTS];
    char *model[FAKE_MAX_POSTS];

    /* Inside. */
    int listen_fd, active, n_conns;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_t acceptor;
    pthread_t conns[FAKE_MAX_CONNS];
} FakeServer;

/* Listens on 127.0.0.1 (an ephemeral port, in fs->port) and serves until stopped. */
int fake_server_start(FakeServer *fs);
/* Stops accepting, waits for every connection's thread; the recorded fields stay. */
void fake_server_stop(FakeServer *fs);
void fake_server_free(FakeServer *fs);

#endif
