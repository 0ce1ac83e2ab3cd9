/* grammar.h: constrained sampling. A reply that must be JSON (any object, or
 * one matching a JSON Schema) is enforced token by token: before each draw,
 * every token whose bytes would make the text so far stop being the start of
 * a valid document gets the logit -inf, so the sampler cannot pick it.
 *
 *   logits -> logit_bias -> grammar_mask (-inf for what leaves the grammar)
 *          -> the sampler: penalties, temperature, top-k, top-p, min-p, draw
 *
 * Setting a logit to -inf gives the token the weight e^-inf = 0, and the
 * sampler divides by the sum of the weights that are left: the allowed tokens
 * keep their relative odds exactly (the distribution renormalized over them).
 * When the document is complete only end-of-generation tokens are allowed.
 *
 * The grammar is a pushdown automaton over bytes (a stack of frames: object,
 * array, string, number, literal), fed the reply one byte at a time. Testing
 * 151,936 tokens one by one would feed it millions of bytes per step; instead
 * the mask walks the vocabulary's byte trie (token_trie.h) with the automaton,
 * dropping a whole subtree at its first illegal byte, and taking a whole
 * subtree without a visit when inside a string its tokens are plain text.
 *
 * The supported JSON Schema subset: type (one or a list of object, array,
 * string, number, integer, boolean, null), properties, required,
 * additionalProperties (false or true: the reply holds only the listed
 * properties, in the schema's order), items, minItems, maxItems, minLength,
 * maxLength, enum, const; annotations (title, description, default, examples,
 * $schema, $id, $comment, strict) are ignored. Any other keyword ($ref, oneOf,
 * anyOf, pattern, format, minimum, ...) is refused, naming it.
 *
 * Bounds, so that a reply always ends: at most GRAMMAR_MAX_WS whitespace bytes
 * in a row (GRAMMAR_MAX_NEWLINES of them line breaks: "\n " and ", " pass, an
 * indented pretty-print does not; a model fond of blank lines would spend its
 * tokens on them), strings of at most GRAMMAR_MAX_STRING characters (or maxLength),
 * numbers of at most GRAMMAR_MAX_NUMBER bytes, nesting at most GRAMMAR_MAX_DEPTH
 * deep. The length of arrays and of objects without properties is bounded only
 * by max_tokens (then the reply is cut: finish_reason "length"). */
#ifndef GRAMMAR_H
#define GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "token_trie.h"

#define GRAMMAR_MAX_WS 2
#define GRAMMAR_MAX_NEWLINES 1
#define GRAMMAR_MAX_STRING 4096
#define GRAMMAR_MAX_NUMBER 24
#define GRAMMAR_MAX_DEPTH 24

/* A compiled grammar: immutable, shared by every reply that uses it. */
typedef struct Grammar Grammar;

/* prefix, then one JSON value matching schema, then suffix. schema NULL: any
 * JSON object (response_format json_object). prefix and suffix are literal
 * text, may be NULL (tool calls: "<tool_call>\n" + {"name":..,"arguments":..}
 * + "\n</tool_call>"). NULL with err naming the unsupported keyword or the bad
 * value, and its place in the schema ("properties.address.pattern"). */
Grammar *grammar_create(const char *prefix, const JsonValue *schema, const char *suffix, char *err);
void grammar_free(Grammar *g);

/* One reply's progress through a grammar (its own for each choice). */
typedef struct GrammarState GrammarState;

GrammarState *grammar_start(const Grammar *g);
void grammar_state_free(GrammarState *s);
/* Feeds text[0..n): true if the text so far is still the start of a document
 * (then s has advanced), false if not (then s is unchanged). */
bool grammar_feed(GrammarState *s, const char *text, size_t n);
/* The text so far is a whole document: it may end here. */
bool grammar_complete(const GrammarState *s);

/* Sets logits[id] = -inf for every token of trie's vocabulary that would
 * leave the grammar (and for the end-of-generation ones unless the document
 * is complete). Returns how many tokens stay allowed (0: none; then the
 * reply cannot go on). */
int grammar_mask(GrammarState *s, const TokenTrie *trie, float *logits);
/* Advances s by token id's bytes (an end-of-generation token: needs a
 * complete document). false if the token leaves the grammar (s unchanged). */
bool grammar_accept(GrammarState *s, const TokenTrie *trie, int32_t id);

#endif
