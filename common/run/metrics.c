/* metrics.c: see metrics.h. */
#include "metrics.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

const char *phase_name(Phase p) { return p == PHASE_PREFILL ? "prefill" : "decode"; }

void metrics_begin(Metrics *m, int prompt_tokens) {
    memset(m, 0, sizeof *m);
    m->prompt_tokens = prompt_tokens;
    m->t_start = time_now_ms();
}

/* Token bytes made printable on one line: control bytes escaped. */
static void display_text(char *out, size_t cap, const char *s, int n) {
    size_t o = 0;
    for (int i = 0; i < n && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') o += (size_t)snprintf(out + o, cap - o, "\\n");
        else if (c == '\t') o += (size_t)snprintf(out + o, cap - o, "\\t");
        else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else out[o++] = (char)c;
    }
    out[o] = '\0';
}

void metrics_step(Metrics *m, int32_t token, float prob, Phase phase, int n_rows, double forward_ms,
                  const char *bytes, int n_bytes) {
    double now = time_now_ms();
    if (m->n_steps == 0) m->t_first = now;
    m->t_last = now;
    if (m->n_steps == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->steps = xrealloc(m->steps, sizeof *m->steps * (size_t)m->cap);
    }
    StepEvent *e = &m->steps[m->n_steps];
    e->step = m->n_steps++;
    e->token = token;
    e->prob = prob;
    e->phase = phase;
    e->n_rows = n_rows;
    e->forward_ms = forward_ms;
    display_text(e->text, sizeof e->text, bytes, n_bytes);
}

void metrics_free(Metrics *m) {
    free(m->steps);
    memset(m, 0, sizeof *m);
}

double metrics_ttft_ms(const Metrics *m) { return m->n_steps ? m->t_first - m->t_start : 0.0; }

double metrics_decode_tps(const Metrics *m) {
    if (m->n_steps < 2 || m->t_last <= m->t_first) return 0.0;
    return (m->n_steps - 1) / ((m->t_last - m->t_first) / 1000.0);
}

typedef struct { double min, max, mean; } Spread;

static Spread forward_spread(const Metrics *m) {
    Spread s = {0, 0, 0};
    for (int i = 0; i < m->n_steps; i++) {
        double t = m->steps[i].forward_ms;
        if (i == 0 || t < s.min) s.min = t;
        if (i == 0 || t > s.max) s.max = t;
        s.mean += t;
    }
    if (m->n_steps) s.mean /= m->n_steps;
    return s;
}

void metrics_print(const Metrics *m, FILE *f) {
    fprintf(f, "\n step  phase     rows     token    prob  forward ms  text\n");
    for (int i = 0; i < m->n_steps; i++) {
        const StepEvent *e = &m->steps[i];
        fprintf(f, "%5d  %-7s %6d  %8d  %6.3f  %10.2f  '%s'\n", e->step, phase_name(e->phase), e->n_rows,
                e->token, e->prob, e->forward_ms, e->text);
    }
    fprintf(f, "\n");
    metrics_print_summary(m, f);
}

void metrics_print_summary(const Metrics *m, FILE *f) {
    Spread s = forward_spread(m);
    fprintf(f, "prompt tokens       %d\n", m->prompt_tokens);
    fprintf(f, "generated tokens    %d\n", m->n_steps);
    fprintf(f, "time to first token %.2f ms\n", metrics_ttft_ms(m));
    fprintf(f, "decode              %.2f tokens/s\n", metrics_decode_tps(m));
    fprintf(f, "forward ms          min %.2f  max %.2f  mean %.2f\n", s.min, s.max, s.mean);
}

void metrics_json(const Metrics *m, Buf *b) {
    Spread s = forward_spread(m);
    buf_printf(b, "\"ttft_ms\":%.3f,\"decode_tokens_per_s\":%.3f,", metrics_ttft_ms(m), metrics_decode_tps(m));
    buf_printf(b, "\"forward_ms\":{\"min\":%.3f,\"max\":%.3f,\"mean\":%.3f,\"each\":[", s.min, s.max, s.mean);
    for (int i = 0; i < m->n_steps; i++) buf_printf(b, "%s%.3f", i ? "," : "", m->steps[i].forward_ms);
    buf_puts(b, "]},\"steps\":[");
    for (int i = 0; i < m->n_steps; i++) {
        const StepEvent *e = &m->steps[i];
        buf_printf(b, "%s{\"step\":%d,\"token\":%d,\"prob\":%.6f,\"phase\":\"%s\",\"rows\":%d,\"ms\":%.3f}",
                   i ? "," : "", e->step, e->token, e->prob, phase_name(e->phase), e->n_rows, e->forward_ms);
    }
    buf_puts(b, "]");
}
