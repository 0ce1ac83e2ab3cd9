/* ab.c: see ab.h. The load and the servers are ab.sh's (shared with make
 * bench-ab); this reads back its ab.json, one object per weight type. */
#include "ab.h"

#include <string.h>
#include <unistd.h>

#include "batched.h"
#include "json.h"
#include "util.h"

static bool ab_one(const AbPlan *p, const char *models, const char *type, AbRow *r) {
    char cmd[4096];
    memset(r, 0, sizeof *r);
    snprintf(r->type, sizeof r->type, "%s", type);
    snprintf(cmd, sizeof cmd,
             "%s %s %s %s/qwen3-0.6b-%s.gguf %s/ab-%s %s '--backend parallel --threads %d' >&2 && cat %s/ab-%s/ab.json",
             p->script, p->server, p->loadgen, models, type, p->out, type, p->load, p->threads, p->out, type);
    fprintf(stderr, "bench: %s\n", cmd);
    JsonValue *v = bench_run_json(cmd);
    if (!v) {
        fprintf(stderr, "bench: the A/B of %s failed\n", type);
        return false;
    }
    r->requests = (int)bench_num(v, "requests");
    r->concurrency = (int)bench_num(v, "concurrency");
    r->prompt_tokens = (int)bench_num(v, "prompt_tokens");
    r->output_tokens = (int)bench_num(v, "output_tokens");
    r->tps_1 = bench_num(v, "tps_1");
    r->tps_n = bench_num(v, "tps_n");
    r->ratio = bench_num(v, "ratio");
    r->ttft_p50_ms_1 = bench_num(v, "ttft_p50_ms_1");
    r->ttft_p50_ms_n = bench_num(v, "ttft_p50_ms_n");
    r->itl_p50_ms_1 = bench_num(v, "itl_p50_ms_1");
    r->itl_p50_ms_n = bench_num(v, "itl_p50_ms_n");
    json_free(v);
    return r->tps_1 > 0 && r->tps_n > 0;
}

int ab_run(const AbPlan *p, const char *models, char *const *types, int n_types, AbRow **rows) {
    *rows = NULL;
    if (!p->load[strspn(p->load, " ")]) return 0;
    if (access(p->server, X_OK) != 0 || access(p->loadgen, X_OK) != 0) {
        fprintf(stderr, "bench: no A/B: %s or %s is not built\n", p->server, p->loadgen);
        return 0;
    }
    *rows = xcalloc((size_t)n_types, sizeof **rows);
    for (int t = 0; t < n_types; t++) (*rows)[t].ok = ab_one(p, models, types[t], &(*rows)[t]);
    return n_types;
}

void ab_print(FILE *f, const AbPlan *p, const AbRow *rows, int n) {
    fprintf(f, "\n## The A/B: one load against chat-server --max-concurrent 1 and C (chapter III.7)\n\n");
    fprintf(f, "tools/loadgen sends N streaming chat requests, C at a time, each a prompt of P words and O output\n"
               "tokens (ignore_eos), to the III.7 chat-server (parallel backend, %d threads) started with\n"
               "--max-concurrent 1, then to one started with --max-concurrent C; one run each, in this order.\n"
               "Output tok/s = completed output tokens / wall time from the first request sent to the last byte.\n"
               "TTFT and ITL: the median time to first token and inter-token latency the clients saw.\n"
               "Load \"N C P O\" = \"%s\" (BENCH_AB_LOAD).\n\n",
            p->threads, p->load);
    fprintf(f, "| type | N | C | P | O | tok/s, 1 slot | tok/s, C slots | ratio | TTFT p50 ms, 1 | TTFT p50 ms, C "
               "| ITL p50 ms, 1 | ITL p50 ms, C |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const AbRow *r = &rows[i];
        if (!r->ok) {
            fprintf(f, "| %s | | | | | failed | | | | | | |\n", r->type);
            continue;
        }
        fprintf(f, "| %s | %d | %d | %d | %d | %.2f | %.2f | %.2f | %.0f | %.0f | %.0f | %.0f |\n", r->type, r->requests,
                r->concurrency, r->prompt_tokens, r->output_tokens, r->tps_1, r->tps_n, r->ratio, r->ttft_p50_ms_1,
                r->ttft_p50_ms_n, r->itl_p50_ms_1, r->itl_p50_ms_n);
    }
}

void ab_json(FILE *f, const AbRow *rows, int n) {
    fprintf(f, "\"ab\":[\n");
    for (int i = 0, k = 0; i < n; i++) {
        const AbRow *r = &rows[i];
        if (!r->ok) continue;
        fprintf(f,
                "%s{\"type\":\"%s\",\"requests\":%d,\"concurrency\":%d,\"prompt_tokens\":%d,\"output_tokens\":%d,"
                "\"tps_1\":%.3f,\"tps_n\":%.3f,\"ratio\":%.3f,\"ttft_p50_ms_1\":%.1f,\"ttft_p50_ms_n\":%.1f,"
                "\"itl_p50_ms_1\":%.1f,\"itl_p50_ms_n\":%.1f}\n",
                k++ ? "," : "", r->type, r->requests, r->concurrency, r->prompt_tokens, r->output_tokens, r->tps_1,
                r->tps_n, r->ratio, r->ttft_p50_ms_1, r->ttft_p50_ms_n, r->itl_p50_ms_1, r->itl_p50_ms_n);
    }
    fprintf(f, "]");
}
