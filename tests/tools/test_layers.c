/* test_layers.c: common/ is layered (common/README.md): a file includes
 * headers of its own folder and of the folders below it, never above. The
 * order is the Makefile's COMMON_LAYERS, lowest first, after common/ itself. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "chapfs.h"
#include "fixture.h"
#include "harness.h"

/* The layers named on the Makefile's "COMMON_LAYERS :=" line, with "" (the
 * root, util) first. */
static void read_layers(const char *makefile, StrList *out) {
    strlist_push(out, "");
    char *text = chapfs_read(makefile, NULL);
    CHECK_MSG(text != NULL, "cannot read %s (run from the repo root)", makefile);
    if (!text) return;
    char *line = strstr(text, "\nCOMMON_LAYERS");
    char *eq = line ? strstr(line, ":=") : NULL;
    CHECK_MSG(eq != NULL, "%s has no COMMON_LAYERS := line", makefile);
    if (eq) {
        char *end = strchr(eq, '\n');
        if (end) *end = '\0';
        for (char *w = strtok(eq + 2, " \t"); w; w = strtok(NULL, " \t")) strlist_push(out, w);
    }
    free(text);
}

static char *layer_dir(const char *root, const char *layer) {
    return layer[0] ? chapfs_printf("%s/%s", root, layer) : chapfs_strdup(root);
}

/* The layer holding header `name`, or -1. */
static int layer_of(const char *root, const StrList *layers, const char *name) {
    for (int i = 0; i < layers->n; i++) {
        char *dir = layer_dir(root, layers->items[i]);
        char *path = chapfs_printf("%s/%s", dir, name);
        bool here = chapfs_is_file(path);
        free(dir);
        free(path);
        if (here) return i;
    }
    return -1;
}

/* Appends to out one line per include in file (of layer `level`) that names a
 * header of a higher layer or of no layer at all. */
static void check_file(const char *root, const StrList *layers, int level, const char *path, StrList *out) {
    char *text = chapfs_read(path, NULL);
    if (!text) return;
    for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "#include \"", 10) != 0) continue;
        char *end = strchr(line + 10, '"');
        if (!end) continue;
        char *name = chapfs_strndup(line + 10, (size_t)(end - line - 10));
        int at = layer_of(root, layers, name);
        if (at < 0)
            strlist_pushf(out, "%s includes \"%s\", which is in no layer of %s", path, name, root);
        else if (at > level)
            strlist_pushf(out, "%s (layer %s) includes \"%s\" from the higher layer %s", path,
                          level ? layers->items[level] : "common/", name, layers->items[at]);
        free(name);
    }
    free(text);
}

/* Every include of every .c and .h under root that breaks the layering; also
 * a folder under root that is not a layer (the Makefile would not build it). */
static StrList layer_violations(const char *root, const char *makefile) {
    StrList layers = {0}, out = {0};
    read_layers(makefile, &layers);
    for (int i = 0; i < layers.n; i++) {
        char *dir = layer_dir(root, layers.items[i]);
        DIR *d = opendir(dir);
        CHECK_MSG(d != NULL, "no folder %s for layer '%s'", dir, layers.items[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char *path = chapfs_printf("%s/%s", dir, e->d_name);
            size_t len = strlen(e->d_name);
            if (i == 0 && chapfs_is_dir(path) && strlist_find(&layers, e->d_name) < 0)
                strlist_pushf(&out, "%s is a folder but not a layer in COMMON_LAYERS", path);
            else if (len > 2 && e->d_name[len - 2] == '.' && strchr("ch", e->d_name[len - 1]))
                check_file(root, &layers, i, path, &out);
            free(path);
        }
        if (d) closedir(d);
        free(dir);
    }
    strlist_free(&layers);
    return out;
}

TEST(layers_common_includes_only_downward) {
    StrList v = layer_violations("common", "Makefile");
    char *all = strlist_join(&v, "\n  ");
    CHECK_MSG(v.n == 0, "%d includes break common/'s layering:\n  %s", v.n, all);
    free(all);
    strlist_free(&v);
}

/* The check itself: a planted upward include, a header of no layer and a
 * folder that is not a layer are each caught. */
TEST(layers_catches_an_upward_include) {
    char *root = chapfs_strdup(test_tmp_path("layers/common"));
    char *cmd = chapfs_printf("rm -rf '%s' && mkdir -p '%s/low' '%s/high' '%s/stray'", root, root, root, root);
    fx_sh(cmd);
    free(cmd);
    char *mk = chapfs_strdup(test_tmp_path("layers/Makefile"));
    FILE *f = fopen(mk, "w");
    if (f) {
        fputs("# a Makefile\nCOMMON_LAYERS := low high\n", f);
        fclose(f);
    }
    char *low = chapfs_printf("%s/low", root), *high = chapfs_printf("%s/high", root);
    fx_write(root, "util.h", "/* util */\n");
    fx_write(high, "top.h", "#include \"util.h\"\n#include \"base.h\"\n");
    fx_write(low, "base.h", "#include \"util.h\"\n");
    fx_write(low, "base.c", "#include \"base.h\"\n#include \"top.h\"\n#include \"nowhere.h\"\n#include <stdio.h>\n");
    StrList v = layer_violations(root, mk);
    char *all = strlist_join(&v, "\n");
    CHECK_MSG(v.n == 3, "want 3 violations, got %d:\n%s", v.n, all);
    CHECK_MSG(strstr(all, "base.c (layer low) includes \"top.h\" from the higher layer high") != NULL, "%s", all);
    CHECK_MSG(strstr(all, "\"nowhere.h\", which is in no layer") != NULL, "%s", all);
    CHECK_MSG(strstr(all, "stray is a folder but not a layer") != NULL, "%s", all);
    free(all);
    strlist_free(&v);
    free(low);
    free(high);
    free(mk);
    free(root);
}
