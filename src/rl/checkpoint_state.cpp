// Reading a checkpoint's state.json (see checkpoint_state.h).
#include "rl/checkpoint_state.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/error.h"

namespace hone::rl {

CheckpointState parse_checkpoint_state(const std::string& text, const std::string& path) {
  using json = nlohmann::json;
  const json st = json::parse(text, nullptr, /*allow_exceptions=*/false);
  HONE_USER_CHECK(!st.is_discarded() && st.is_object(), path, ": not a hone checkpoint state (not a JSON object)");
  HONE_USER_CHECK(st.contains("format") && st["format"] == "hone-grpo-state-1", path, ": unknown checkpoint format");
  auto integer = [&](const char* key, int64_t lo, int64_t hi) {
    HONE_USER_CHECK(st.contains(key), path, ": field '", key, "' is missing");
    const json& v = st[key];
    HONE_USER_CHECK(v.is_number_integer(), path, ": field '", key, "' is not an integer");
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(hi)
                                                  : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    HONE_USER_CHECK(in_range, path, ": field '", key, "' = ", v.dump(), " is out of range");
    return v.get<int64_t>();
  };
  CheckpointState s;
  s.step = integer("step", 0, std::numeric_limits<int64_t>::max());
  HONE_USER_CHECK(st.contains("seed") && st["seed"].is_number_unsigned(), path,
                  ": field 'seed' is missing or not a non-negative integer");
  s.seed = st["seed"].get<uint64_t>();
  s.optimizer_step = integer("optimizer_step", 0, std::numeric_limits<int>::max());
  HONE_USER_CHECK(st.contains("data_cursor") && st["data_cursor"].is_string(), path,
                  ": field 'data_cursor' is missing or not a string");
  s.data_cursor = st["data_cursor"].get<std::string>();
  return s;
}

}  // namespace hone::rl
