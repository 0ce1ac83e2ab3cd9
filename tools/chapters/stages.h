/* stages.h: a chapter's lessons. A chapter snapshot (III.7, say) carries
 * several stages of the book (III.5 the prefix cache, III.6 the scheduler,
 * III.7 batched decode), each a `stage` group of its MANIFEST. A file is
 * declared by one stage only (the manifest check makes sure), so the engine
 * "after stage S" is well defined: the chapter before, with the files of the
 * stages up to S taken from this chapter (added or changed) or taken away
 * (removed). The diff of S alone is the diff of the views before and after it.
 * The views are for reading: an early stage's view need not compile (III.1's
 * chat-repl uses the Sequence of the later III.4 stage). */
#ifndef STAGES_H
#define STAGES_H

#include <stddef.h>

#include "chapfs.h"

/* One stage as the tools list it. */
typedef struct {
    char *chapter;  /* the snapshot that carries it */
    char *id;       /* its id, the book's stage: "III.5" */
    char *before;   /* the view it starts from: the stage before it, or the chapter before */
    char *title;
} Stage;

typedef struct {
    Stage *items;
    int n;
} StageList;

/* Every stage of the chapters under chapters_dir, in book order. A chapter
 * whose MANIFEST has no stage line is one stage named after it. Returns the
 * number of problems added (unreadable or malformed MANIFESTs). */
int stages_list(const char *chapters_dir, StageList *out, StrList *problems);
void stages_free(StageList *l);
/* The stage named id, or NULL. */
const Stage *stages_find(const StageList *l, const char *id);

/* Writes out_dir/<before> and out_dir/<id>: the views before and after stage
 * s, each with a MANIFEST (the view after it declares the stage's part of the
 * chapter's MANIFEST against the view before), so that the chapter diff and
 * the manifest check run on them as on two chapters. out_dir must be empty or
 * absent. Returns 0, or -1 with a message in err. */
int stages_write_views(const char *chapters_dir, const Stage *s, const char *out_dir, char *err, size_t err_len);

/* rm -rf dir (what stages_write_views made). */
void stages_remove_dir(const char *dir);

#endif
