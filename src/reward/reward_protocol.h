// The JSON-lines protocol of reward.command (doc/data-and-rewards.md, "Your own reward"): one request line per
// rollout from hone, one reply line per request from the reward process, in the same order.
//   request: {"prompt": "...", "messages": [{"role": "user", "content": "..."}], "completion": "...",
//             "answer": "...", "extra": {...the JSONL row's other fields...}, "id": 17, "step": 3,
//             "completion_tokens": 12, "finish_reason": "stop", "batch_index": 0, "batch_size": 64}
//   reply:   0.5   or   {"reward": 0.5, "correct": true, "format": 1, "length_penalty": -0.1}
// A reply object's other fields are named sub-scores (numbers or booleans), kept as metrics scores/<name>. Without
// "correct" (and for a bare number) a rollout counts as correct, for the accuracy metric, when its reward is > 0.
#pragma once

#include <cstddef>
#include <string>

#include "reward/batch_reward.h"

namespace hone::reward {

// One request line, '\n' included. Text that is not valid UTF-8 is sent with U+FFFD in place of the bad bytes.
std::string reward_request_line(const RewardQuery& q, size_t batch_index, size_t batch_size);

// Parses one reply line. UserError saying what is wrong with it (the caller adds which line of which process).
RewardResult parse_reward_reply(const std::string& line);

}  // namespace hone::reward
