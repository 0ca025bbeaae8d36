// Built-in rewards as batch rewards, and batching (see batch_reward.h).
#include "reward/batch_reward.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone::reward {

std::vector<RewardResult> BuiltinReward::score(const std::vector<RewardQuery>& batch) {
  std::vector<RewardResult> out;
  out.reserve(batch.size());
  for (const RewardQuery& q : batch) out.push_back(f_->score(*q.prompt, std::string(q.completion)));
  return out;
}

std::vector<RewardResult> score_in_batches(BatchReward& reward, const std::vector<RewardQuery>& queries,
                                           int64_t batch_size) {
  HONE_CHECK(batch_size >= 0, "batch size ", batch_size);
  const size_t n = queries.size();
  const size_t step = batch_size > 0 ? size_t(batch_size) : std::max<size_t>(n, 1);
  std::vector<RewardResult> out;
  out.reserve(n);
  for (size_t begin = 0; begin < n; begin += step) {
    const std::vector<RewardQuery> batch(queries.begin() + ptrdiff_t(begin),
                                         queries.begin() + ptrdiff_t(std::min(n, begin + step)));
    std::vector<RewardResult> r = reward.score(batch);
    HONE_CHECK(r.size() == batch.size(), reward.name(), " gave ", r.size(), " results for ", batch.size(), " queries");
    for (auto& x : r) out.push_back(std::move(x));
  }
  return out;
}

bool valid_score_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace hone::reward
