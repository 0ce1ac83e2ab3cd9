/* prometheus.h: writing metrics in Prometheus' text exposition format
 * (what GET /metrics answers): counters, gauges and histograms with their
 * # HELP and # TYPE lines. Not locked: the caller guards what it shares. */
#ifndef PROMETHEUS_H
#define PROMETHEUS_H

#include <stdint.h>

#include "util.h"

#define PROM_MAX_BUCKETS 16

/* Observations counted in cumulative buckets "le" (less or equal) bounds[i],
 * plus +Inf, with their sum and count. */
typedef struct {
    double bounds[PROM_MAX_BUCKETS]; /* increasing upper bounds */
    int n_bounds;
    uint64_t counts[PROM_MAX_BUCKETS + 1]; /* per bucket, not cumulative; the last is above every bound */
    double sum;
    uint64_t count;
} PromHistogram;

void prom_histogram_init(PromHistogram *h, const double *bounds, int n_bounds);
void prom_histogram_observe(PromHistogram *h, double x);

/* The # HELP and # TYPE lines of a metric. type: "counter", "gauge", "histogram". */
void prom_header(Buf *out, const char *name, const char *type, const char *help);
/* One sample line: name{labels} value (labels may be NULL: 'k="v",k2="v2"'). */
void prom_sample(Buf *out, const char *name, const char *labels, double value);
/* A whole histogram: header, _bucket lines (cumulative), _sum and _count. */
void prom_histogram(Buf *out, const char *name, const char *help, const PromHistogram *h);

#endif
