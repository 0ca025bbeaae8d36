// Prompts for GRPO steps: the one interface shared by JSONL datasets and built-in synthetic tasks.
// A source is an endless stream of epochs; each epoch is a (possibly shuffled) order of its prompts. Every step
// takes the next prompts_per_step prompts of the stream and splits them over the data-parallel ranks, so the union
// over ranks is what a single rank would get and the cursor advances the same on every rank.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace hone::data {

struct PromptMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

struct Prompt {
  std::string text;                    // the raw prompt: the string prompt, or the messages' contents joined by "\n\n"
  std::vector<PromptMessage> messages; // the chat form; a plain string prompt is one user message
  std::string answer;                  // the ground truth (empty when the dataset has no answer key)
  int64_t id = 0;                      // stable id: the line number in a JSONL file, the example index of a task
  std::string source;                  // where it came from, for messages: "data/math.jsonl:17", "countdown#12"
  std::vector<int32_t> token_ids;      // given token ids (the random_tokens benchmark task): used as they are
  std::string extra_json = "{}";       // the JSONL row's other fields (all but the prompt and answer keys), a JSON
                                       // object handed to external rewards as is
};

// Where the stream stands: the next prompt is number `position` of epoch `epoch`'s order.
struct DataCursor {
  int64_t epoch = 0;
  int64_t position = 0;
  int64_t epoch_size = -1;  // size of the source it was saved from (-1: unknown; checked on restore when known)

  // {"epoch":E,"position":P,"epoch_size":N}
  std::string to_string() const;
  // Parses to_string()'s form; UserError on anything else.
  static DataCursor parse(const std::string& text);
  bool operator==(const DataCursor& o) const { return epoch == o.epoch && position == o.position; }
};

// [begin, end) of the items of a step that rank `rank` of `world` gets: contiguous, sizes differ by at most one.
struct ShardRange {
  int64_t begin = 0, end = 0;
};
ShardRange shard_range(int64_t count, int rank, int world);

class PromptSource {
 public:
  static constexpr int64_t kEndless = std::numeric_limits<int64_t>::max();

  virtual ~PromptSource() = default;

  // The next step's prompts for this data-parallel rank: of the next prompts_per_step prompts of the stream, the
  // shard_range(prompts_per_step, dp_rank, dp_size) part. Advances the cursor by prompts_per_step on every rank;
  // epochs roll over (a step may span two epochs).
  std::vector<Prompt> next_batch(int64_t prompts_per_step, int dp_rank = 0, int dp_size = 1);

  DataCursor cursor() const;
  // Restores a cursor saved by cursor(); UserError when it does not fit this source.
  void set_cursor(const DataCursor& c);
  std::string save_cursor() const { return cursor().to_string(); }
  void restore_cursor(const std::string& text) { set_cursor(DataCursor::parse(text)); }

  // Prompts per epoch (kEndless for generated tasks).
  virtual int64_t epoch_size() const = 0;
  // One line for logs: what the source is and what it dropped.
  virtual std::string describe() const = 0;

 protected:
  // The prompts at the given (epoch, position) places of the stream, in order.
  struct Place {
    int64_t epoch, position;
  };
  virtual std::vector<Prompt> fetch(const std::vector<Place>& places) = 0;

 private:
  int64_t epoch_ = 0, position_ = 0;
};

}  // namespace hone::data
