/* model_info.h: a summary of a GGUF file, for a user deciding whether to
 * trust it (model-generate --info): the architecture and shapes, the
 * tokenizer, the tensor types and their bytes, the file type it claims, the
 * keys this engine ignores although they could change the result, and
 * whether this engine can run it (and if not, why). */
#ifndef MODEL_INFO_H
#define MODEL_INFO_H

#include <stdio.h>

/* Prints the summary of the file at path to out. Returns 0 when the engine can
 * run the file, 1 when it cannot (the summary says why, and err holds the
 * reason), -1 with err when the file is not a readable GGUF at all (nothing is
 * printed then). */
int model_info_print(const char *path, FILE *out, char *err);

#endif
