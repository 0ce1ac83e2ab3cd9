/* libfuzzer_help.c: linked into each libFuzzer binary (build/fuzz/fuzz-NAME),
 * so that `fuzz-NAME --help` prints a usage and exits, as every program of the
 * project does, instead of taking "--help" for a corpus and fuzzing forever.
 * libFuzzer calls LLVMFuzzerInitialize before anything else. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    for (int i = 1; i < *argc; i++)
        if (!strcmp((*argv)[i], "--help") || !strcmp((*argv)[i], "-h")) {
            printf("usage: fuzz-%s [libFuzzer flags] [CORPUS_DIR... | INPUT_FILE...]\n"
                   "A libFuzzer target of the project (tests/fuzz/fuzz_%s.c): fuzzes from the corpus\n"
                   "directories, or runs each input file once. `make fuzz` runs it with the seeds of\n"
                   "tests/fuzz/corpus/%s; libFuzzer's own flags: -help=1.\n", FUZZ_NAME, FUZZ_NAME, FUZZ_NAME);
            exit(0);
        }
    return 0;
}
