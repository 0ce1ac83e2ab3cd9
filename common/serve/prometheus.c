/* prometheus.c: see prometheus.h. */
#include "prometheus.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void prom_histogram_init(PromHistogram *h, const double *bounds, int n_bounds) {
    memset(h, 0, sizeof *h);
    h->n_bounds = n_bounds < PROM_MAX_BUCKETS ? n_bounds : PROM_MAX_BUCKETS;
    memcpy(h->bounds, bounds, sizeof(double) * (size_t)h->n_bounds);
}

void prom_histogram_observe(PromHistogram *h, double x) {
    int i = 0;
    while (i < h->n_bounds && x > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += x;
    h->count++;
}

void prom_header(Buf *out, const char *name, const char *type, const char *help) {
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prometheus wants Go's float syntax: integers plainly, +Inf for infinity. */
static void append_value(Buf *out, double v) {
    if (isinf(v)) buf_puts(out, v > 0 ? "+Inf" : "-Inf");
    else if (isnan(v)) buf_puts(out, "NaN");
    else if (v == floor(v) && fabs(v) < 1e15) buf_printf(out, "%.0f", v);
    else buf_printf(out, "%.17g", v);
}

void prom_sample(Buf *out, const char *name, const char *labels, double value) {
    buf_puts(out, name);
    if (labels && *labels) buf_printf(out, "{%s}", labels);
    buf_puts(out, " ");
    append_value(out, value);
    buf_puts(out, "\n");
}

void prom_histogram(Buf *out, const char *name, const char *help, const PromHistogram *h) {
    prom_header(out, name, "histogram", help);
    char metric[128], le[64];
    snprintf(metric, sizeof metric, "%s_bucket", name);
    uint64_t cum = 0;
    for (int i = 0; i <= h->n_bounds; i++) {
        cum += h->counts[i];
        if (i < h->n_bounds) snprintf(le, sizeof le, "le=\"%g\"", h->bounds[i]);
        else snprintf(le, sizeof le, "le=\"+Inf\"");
        prom_sample(out, metric, le, (double)cum);
    }
    snprintf(metric, sizeof metric, "%s_sum", name);
    prom_sample(out, metric, NULL, h->sum);
    snprintf(metric, sizeof metric, "%s_count", name);
    prom_sample(out, metric, NULL, (double)h->count);
}
