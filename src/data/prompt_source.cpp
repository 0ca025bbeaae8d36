// Stepping, sharding and cursors shared by every prompt source (see prompt_source.h).
#include "data/prompt_source.h"

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/one_line.h"

namespace hone::data {

std::string DataCursor::to_string() const {
  nlohmann::json j = {{"epoch", epoch}, {"position", position}, {"epoch_size", epoch_size}};
  return j.dump();
}

DataCursor DataCursor::parse(const std::string& text) {
  const std::string bad =
      cat("invalid data cursor '", one_line_excerpt(text), "': expected {\"epoch\":E,\"position\":P,\"epoch_size\":N}");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  HONE_USER_CHECK(j.is_object() && j.contains("epoch") && j.contains("position"), bad);
  auto get = [&](const char* key, int64_t fallback) -> int64_t {
    if (!j.contains(key)) return fallback;
    const auto& v = j[key];
    HONE_USER_CHECK(v.is_number_integer(), bad);
    return v.get<int64_t>();
  };
  DataCursor c;
  c.epoch = get("epoch", 0);
  c.position = get("position", 0);
  c.epoch_size = get("epoch_size", -1);
  HONE_USER_CHECK(c.epoch >= 0 && c.position >= 0, bad);
  return c;
}

ShardRange shard_range(int64_t count, int rank, int world) {
  HONE_CHECK(world > 0 && rank >= 0 && rank < world && count >= 0, "rank ", rank, " of ", world, ", count ", count);
  return {count * rank / world, count * (rank + 1) / world};
}

std::vector<Prompt> PromptSource::next_batch(int64_t prompts_per_step, int dp_rank, int dp_size) {
  HONE_CHECK(prompts_per_step > 0, "prompts_per_step must be positive, got ", prompts_per_step);
  const int64_t n = epoch_size();
  HONE_CHECK(n > 0, "empty prompt source");
  ShardRange r = shard_range(prompts_per_step, dp_rank, dp_size);
  std::vector<Place> places;
  places.reserve(static_cast<size_t>(r.end - r.begin));
  // Place of stream item i of this step, counting from the cursor.
  auto place = [&](int64_t i) -> Place {
    int64_t e = epoch_, p = position_;
    if (n == kEndless) return {e, p + i};
    int64_t abs = p + i;  // p < n and i < prompts_per_step, so no overflow for sane sizes
    return {e + abs / n, abs % n};
  };
  for (int64_t i = r.begin; i < r.end; ++i) places.push_back(place(i));
  Place next = place(prompts_per_step);
  std::vector<Prompt> out = fetch(places);
  epoch_ = next.epoch;
  position_ = next.position;
  return out;
}

DataCursor PromptSource::cursor() const {
  DataCursor c;
  c.epoch = epoch_;
  c.position = position_;
  c.epoch_size = epoch_size() == kEndless ? -1 : epoch_size();
  return c;
}

void PromptSource::set_cursor(const DataCursor& c) {
  const int64_t n = epoch_size();
  HONE_USER_CHECK(c.epoch >= 0 && c.position >= 0, "invalid data cursor ", c.to_string());
  if (n != kEndless) {
    HONE_USER_CHECK(c.epoch_size < 0 || c.epoch_size == n, "the data cursor was saved for a source of ", c.epoch_size,
                    " prompts per epoch, but ", describe(), " has ", n, "; the data changed since the checkpoint");
    HONE_USER_CHECK(c.position < n, "data cursor position ", c.position, " is past the end of an epoch of ", n,
                    " prompts");
  }
  epoch_ = c.epoch;
  position_ = c.position;
}

}  // namespace hone::data
