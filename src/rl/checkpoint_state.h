// The state.json of a GRPO checkpoint (step, data cursor, seed, optimizer step count): read here, in one place
// that takes any bytes, so that a damaged or hand-edited file is one UserError naming it and the field.
#pragma once

#include <cstdint>
#include <string>

namespace hone::rl {

struct CheckpointState {
  int64_t step = 0;
  uint64_t seed = 0;
  int64_t optimizer_step = 0;
  std::string data_cursor;  // DataCursor::to_string() form, checked by the prompt source that restores it
};

// text: the file's bytes; path: for messages.
CheckpointState parse_checkpoint_state(const std::string& text, const std::string& path);

}  // namespace hone::rl
