/* manifest-check: checks that each chapter differs from the one before it
 * exactly as its MANIFEST declares (see manifest.h).
 *
 *   manifest-check [--chapters-dir DIR] [CHAPTER...]
 *
 * Prints one line per chapter: "II.2: ok (...)" or one line per problem.
 * Exits 1 if any chapter has a problem, 2 on a usage error. */
#include <stdio.h>
#include <string.h>

#include "chapfs.h"
#include "manifest.h"

static void usage(FILE *f) {
    fprintf(f, "usage: manifest-check [--chapters-dir DIR] [CHAPTER...]\n"
               "Checks each chapter (default: all of them) against the one before it.\n");
}

static void report_ok(const char *chapter, const ManifestStats *st) {
    if (!st->previous[0]) {
        printf("%s: ok (first chapter)\n", chapter);
        return;
    }
    printf("%s: ok (vs %s: %d added, %d removed, %d changed, %d unchanged files; %d functions changed)\n", chapter,
           st->previous, st->added, st->removed, st->changed, st->unchanged, st->fns_changed);
}

/* Checks one chapter and prints its line(s); returns the number of problems. */
static int check_one(const char *dir, const char *chapter) {
    StrList problems = {0};
    ManifestStats st;
    int n = manifest_check_chapter(dir, chapter, &problems, &st);
    if (n == 0) report_ok(chapter, &st);
    for (int i = 0; i < problems.n; i++) printf("%s\n", problems.items[i]);
    strlist_free(&problems);
    return n;
}

int main(int argc, char **argv) {
    const char *dir = "chapters";
    StrList chapters = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--chapters-dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "manifest-check: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            strlist_push(&chapters, argv[i]);
        }
    }
    if (chapters.n == 0 && chapfs_list_chapters(dir, &chapters) < 0) {
        fprintf(stderr, "manifest-check: cannot read the chapters directory %s\n", dir);
        return 2;
    }
    int problems = 0;
    for (int i = 0; i < chapters.n; i++) problems += check_one(dir, chapters.items[i]);
    if (problems) printf("manifest check: %d problem%s\n", problems, problems == 1 ? "" : "s");
    strlist_free(&chapters);
    return problems ? 1 : 0;
}
