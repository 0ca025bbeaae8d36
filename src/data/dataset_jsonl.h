// A prompt dataset read from a JSONL file: one object per line with a prompt (a string, or a list of chat messages
// {"role","content"}) and an answer. Opening scans the file once, line by line, keeping only the byte offsets of
// usable lines; prompts are re-read from disk when a step needs them, so the parsed file is never held in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/jsonl.h"
#include "data/prompt_source.h"

namespace hone::data {

// Deck keys in brackets.
struct DatasetOptions {
  std::string path;                    // [data.path]
  std::string prompt_key = "prompt";   // [data.prompt_key]
  std::string answer_key = "answer";   // [data.answer_key]; empty: lines need no answer
  bool skip_bad_lines = false;         // [data.skip_bad_lines] skip and count malformed lines instead of failing
  bool shuffle = true;                 // [data.shuffle] a fresh permutation per epoch from (run.seed, epoch)
  int64_t max_prompt_tokens = 0;       // [data.max_prompt_tokens] longer prompts are dropped and counted; 0: no limit
  // Where max_prompt_tokens came from when it is not the deck's own value (derived from the generation lengths):
  // said in the messages, so that a user who left data.max_prompt_tokens at 0 is not told it is 124.
  std::string max_prompt_tokens_origin;
  uint64_t seed = 0;                   // [run.seed]
};

// Counts the tokens of a prompt as the model will see it (the caller plugs in the tokenizer, chat template and
// system prompt), so that the length filter measures what generation is given.
using TokenCounter = std::function<int64_t(const Prompt&)>;

struct DatasetStats {
  int64_t lines = 0;       // non-blank lines
  int64_t bad_lines = 0;   // malformed lines skipped (skip_bad_lines)
  int64_t too_long = 0;    // prompts over max_prompt_tokens, dropped
  int64_t usable = 0;      // prompts per epoch
  int64_t longest_prompt_tokens = 0;  // among usable prompts (0 when no token counter)
};

// Turns one parsed JSONL record into a prompt. Throws UserError "<path>:<line>: <what is wrong>" when the line is
// not JSON, not an object, lacks a field or has a field of the wrong type.
Prompt prompt_from_record(const JsonlRecord& rec, const std::string& path, const DatasetOptions& options);

class JsonlPromptDataset : public PromptSource {
 public:
  // Scans the file. UserError: cannot open, malformed line (unless skip_bad_lines), no usable prompt.
  // count_tokens is required when max_prompt_tokens > 0.
  JsonlPromptDataset(const DatasetOptions& options, TokenCounter count_tokens = nullptr);
  ~JsonlPromptDataset() override;

  int64_t epoch_size() const override { return stats_.usable; }
  std::string describe() const override;
  const DatasetStats& stats() const { return stats_; }

  // The prompt of a usable line by its index in file order (0 .. epoch_size()-1).
  Prompt at(int64_t index);
  // The order of epoch e: order[k] is the file-order index of the k-th prompt (identity when shuffle is off).
  const std::vector<int64_t>& epoch_order(int64_t e);

 protected:
  std::vector<Prompt> fetch(const std::vector<Place>& places) override;

 private:
  struct LineRef {
    uint64_t offset;
    int64_t line_number;
  };
  DatasetOptions options_;
  DatasetStats stats_;
  std::vector<LineRef> lines_;
  struct Reader;
  std::unique_ptr<Reader> reader_;
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace hone::data
