/* model-generate (chapter II.2): greedy generation, timed step by step, with
 * the basic KV cache (prefill + decode) by default; --kv none recomputes the
 * whole sequence for every token, as II.1 does. */
#include "generate.h"
#include "kv_cache.h"

int main(int argc, char **argv) { return session_main(argc, argv, KV_KINDS, generate); }
