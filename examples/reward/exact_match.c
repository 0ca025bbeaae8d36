/* An example reward plug-in for hone's reward.library: 1 when the completion's first line is the answer, else 0,
 * with two sub-scores: "answered" (1 when the first line is not empty) and "chars" (the completion's length).
 * The same reward as examples/reward/exact_match.py, inside hone instead of in a process of its own.
 *
 * Build (make builds it as build/examples/libexact_match_reward.so):
 *   cc -std=c11 -O2 -Wall -fPIC -shared -Iinclude -o libexact_match_reward.so examples/reward/exact_match.c
 * Use it in a deck:
 *   [reward]
 *   library = "build/examples/libexact_match_reward.so"
 *   library_options = "trim"      # this plug-in's one option: "trim" (the default) or "exact" (no trimming)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hone/reward_plugin.h"

typedef struct {
  int trim; /* trim spaces and tabs around the answer line and the answer */
} exact_match_state;

static const char* const kScoreNames[] = {"answered", "chars"};

int hone_reward_abi_version(void) { return HONE_REWARD_ABI_VERSION; }

void* hone_reward_create(const char* options, int rank, char* error, size_t error_size) {
  (void)rank;
  exact_match_state* s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(error, error_size, "out of memory");
    return NULL;
  }
  if (options[0] == '\0' || strcmp(options, "trim") == 0) {
    s->trim = 1;
  } else if (strcmp(options, "exact") == 0) {
    s->trim = 0;
  } else {
    snprintf(error, error_size, "unknown option '%s' (use \"trim\" or \"exact\")", options);
    free(s);
    return NULL;
  }
  return s;
}

void hone_reward_destroy(void* state) { free(state); }

int hone_reward_num_scores(void* state) {
  (void)state;
  return 2;
}

const char* hone_reward_score_name(void* state, int index) {
  (void)state;
  return kScoreNames[index];
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* [*begin, *end) shrunk to its first line, spaces and tabs trimmed when asked. */
static void answer_span(const char* text, size_t size, int trim, const char** begin, const char** end) {
  const char* b = text;
  const char* nl = memchr(text, '\n', size);
  const char* e = nl ? nl : text + size;
  if (trim) {
    while (b < e && is_blank(*b)) ++b;
    while (e > b && is_blank(e[-1])) --e;
  }
  *begin = b;
  *end = e;
}

int hone_reward_score(void* state, const hone_reward_query* queries, hone_reward_result* results, size_t count,
                      char* error, size_t error_size) {
  const exact_match_state* s = state;
  (void)error;
  (void)error_size;
  for (size_t i = 0; i < count; ++i) {
    const hone_reward_query* q = &queries[i];
    const char *gb, *ge, *ab, *ae;
    answer_span(q->completion, q->completion_size, s->trim, &gb, &ge);
    answer_span(q->answer, q->answer_size, s->trim, &ab, &ae);
    const size_t given = (size_t)(ge - gb), expected = (size_t)(ae - ab);
    const int correct = given > 0 && given == expected && memcmp(gb, ab, given) == 0;
    results[i].reward = correct ? 1.0 : 0.0;
    results[i].correct = correct;
    results[i].scores[0] = given > 0 ? 1.0 : 0.0;
    results[i].scores[1] = (double)q->completion_size;
  }
  return 0;
}
