/* model-generate (chapter II.1): greedy generation with full recompute,
 * timed step by step. */
#include "generate.h"

int main(int argc, char **argv) { return session_main(argc, argv, NULL, generate); }
