/* amx.h: Q8_0 matmuls of many activation rows on the AMX tile unit of
 * recent Intel Xeons (AMX-INT8), for the AVX-512 kernels' K(pcols).
 *
 * The tile unit multiplies a 16 x 32 block of activation bytes by a 32 x 16
 * block of weight bytes in one instruction, giving the 16 x 16 integer sums
 * that K(pdot) makes with 128 vpdpbusd. Those sums are the same integers, and
 * the float update that follows is K(pdot)'s, operation for operation: the
 * same bits as the AVX-512 kernels, for any batch. The weights are read
 * from their tiles (tiles.h), whose Q8_0 blocks are already in the layout
 * the tile unit takes (4 bytes of each of 16 rows side by side). */
#ifndef AMX_H
#define AMX_H

#include <stdbool.h>

#include "backend_simd.h"

/* Activation rows from which K(pcols) hands a Q8_0 matmul to amx_q8_0_cols. */
#define AMX_MIN_ROWS 4

/* True when this CPU has AMX-INT8, Linux lets this process use it, and
 * SIMD_AMX is not 0 in the environment. Asked once. */
bool amx_usable(void);

/* y[i, o] for every row i of a and o in [c0, c1), c0 a multiple of 16, from
 * w's tiles; a prepared for Q8_0 by the AVX-512 build. amx_usable() first. */
void amx_q8_0_cols(float *y, const SimdActs *a, const Tensor *w, int c0, int c1);

#endif
