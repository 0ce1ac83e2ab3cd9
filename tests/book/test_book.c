/* The book's code includes resolve against the chapters as they are now. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TEST(book_includes_resolve) {
    DIR *d = opendir("book");
    if (!d) SKIP("no book/ directory");
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".md") != 0) continue;
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s/tools/bookpp book/%s > /dev/null", test_build_dir(), e->d_name);
        CHECK_MSG(system(cmd) == 0, "book/%s has an @include that does not resolve", e->d_name);
        n++;
    }
    closedir(d);
    CHECK(n >= 2);
}
