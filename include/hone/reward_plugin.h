/* hone reward plug-in ABI, version 1.
 *
 * A reward plug-in is a shared library (`reward.library = "path/libmyreward.so"` in the deck) that scores GRPO
 * rollouts inside hone, in batches, with no process in between. Build it from C or C++ against this header only:
 *
 *   cc -std=c11 -O2 -fPIC -shared -I<hone>/include -o libmyreward.so myreward.c
 *
 * It exports, with C linkage, the functions below marked REQUIRED, and optionally the two marked OPTIONAL.
 * hone loads it once on every rank that scores rollouts (dlopen, RTLD_NOW | RTLD_LOCAL), checks the ABI version,
 * calls hone_reward_create once, hone_reward_score once per batch (always from the same thread), and
 * hone_reward_destroy when the run ends normally. The library is never unloaded.
 *
 * Errors: a function that fails writes a message into `error` (at most error_size bytes, NUL-terminated) and
 * returns NULL (create) or non-zero (score); hone ends the run with that message. A reward that is NaN or
 * infinite ends the run too. A plug-in runs inside hone: a crash in it is a crash of hone, so a reward that may
 * misbehave (third-party code, network calls) is better run as reward.command, where hone survives it.
 *
 * Text: every string is UTF-8 as hone has it (a completion cut mid-character may hold invalid UTF-8), given both
 * as a pointer to `size` bytes and NUL-terminated. Pointers are valid during the call only.
 */
#ifndef HONE_REWARD_PLUGIN_H
#define HONE_REWARD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HONE_REWARD_ABI_VERSION 1

/* One rollout to score. */
typedef struct hone_reward_query {
  const char* prompt;            /* the raw prompt text (a chat prompt: its messages' contents joined by "\n\n") */
  size_t prompt_size;
  const char* completion;        /* the generated text, cut before a stop string */
  size_t completion_size;
  const char* answer;            /* the dataset's answer field ("" when the dataset has none) */
  size_t answer_size;
  const char* extra_json;        /* the JSONL row's other fields as one JSON object ("{}" when none) */
  size_t extra_json_size;
  const char* messages_json;     /* the prompt as a JSON list of {"role", "content"} messages */
  size_t messages_json_size;
  int64_t prompt_id;             /* the JSONL line number, or the synthetic task's example index */
  int64_t step;                  /* the GRPO step (1-based) */
  int64_t completion_tokens;     /* tokens generated */
  int32_t truncated;             /* 1: stopped by generation.max_new_tokens; 0: by a stop token or string */
} hone_reward_query;

/* What the plug-in writes for one rollout. hone fills in the defaults before the call. */
typedef struct hone_reward_result {
  double reward;    /* the reward (default 0); must be finite */
  int32_t correct;  /* 1 correct, 0 wrong, -1 (default) not said: then a reward > 0 counts as correct (accuracy) */
  double* scores;   /* hone's array of hone_reward_num_scores() sub-scores, NaN by default (NaN: not given);
                       NULL when the plug-in has none */
} hone_reward_result;

/* REQUIRED: returns HONE_REWARD_ABI_VERSION (the version of this header the plug-in was built with). */
int hone_reward_abi_version(void);

/* REQUIRED: makes the plug-in's state from `options` (the deck's reward.library_options string, "" by default;
 * its format is the plug-in's own). `rank` is the MPI world rank. Returns the state (any non-NULL pointer), or
 * NULL with a message in `error`. */
void* hone_reward_create(const char* options, int rank, char* error, size_t error_size);

/* REQUIRED: scores count rollouts: fills results[i] for queries[i]. Returns 0, or non-zero with a message in
 * `error` (the run ends). */
int hone_reward_score(void* state, const hone_reward_query* queries, hone_reward_result* results, size_t count,
                      char* error, size_t error_size);

/* REQUIRED: frees the state. */
void hone_reward_destroy(void* state);

/* OPTIONAL (both or neither): the named sub-scores the plug-in gives, kept per rollout and as the step's metrics
 * scores/<name> (the mean over the rollouts that have a value). A name is 1 to 64 letters, digits, '_', '.', '-'.
 * The returned string must live as long as the state. */
int hone_reward_num_scores(void* state);
const char* hone_reward_score_name(void* state, int index);

#ifdef __cplusplus
}
#endif

#endif /* HONE_REWARD_PLUGIN_H */
