/* fexp.h: e^x for floats, the one exponential of the forward pass (SiLU,
 * softmax, attention's weights). One algorithm, written out here: in
 * double, x / ln 2 = k/32 + a rest of at most 1/64, then 2^(k/32) from a
 * table of 32 and 2^rest from a cubic, rounded once to float at the end.
 * The vector versions take the same steps lane by lane (the fused
 * multiply-adds included), so every width gives the same bits, on every
 * machine and C library; they are those of glibc's expf where it runs its
 * FMA version (x86-64 with FMA and AVX2). */
#ifndef FEXP_H
#define FEXP_H

#include <stddef.h>

/* e^x; +inf past 88.72, 0 below -103.97, NaN for NaN. */
float fexp(float x);
/* y[i] = fexp(x[i]) for i < n, SIMD where the machine has it (y may be x). */
void fexp_array(float *y, const float *x, size_t n);
/* The same in vectors of lanes (16: AVX-512, 8: AVX2, 1: none), whatever
 * SIMD_ISA says; -1 if lanes is another number or this processor has no
 * such vectors. For tests. */
int fexp_array_lanes(int lanes, float *y, const float *x, size_t n);

#endif
