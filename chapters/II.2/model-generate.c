/* model-generate (chapter II.2): greedy generation, timed step by step;
 * --kv [basic] switches from full recompute to prefill + decode. */
#include "generate.h"
#include "kv_cache.h"

int main(int argc, char **argv) { return session_main(argc, argv, KV_KINDS, generate); }
