// The random_tokens task, for benchmarks: every prompt is data.prompt_tokens token ids drawn uniformly from the
// model's vocabulary (given as ids, no tokenizer round trip), so a benchmark deck sets the exact prompt length of a
// published configuration. There is nothing to get right: every completion scores 0, so advantages are 0 and the
// loss gradient vanishes, but every phase does its full work (the benchmark measures time, not learning). How long
// each completion runs is the benchmark's choice too: data.response_length (data/response_length.h).
#include "data/data_rng.h"
#include "data/synthetic_tasks.h"
#include "runtime/error.h"

namespace hone::data {
namespace {

class RandomTokensTask : public SyntheticTask {
 public:
  explicit RandomTokensTask(const SyntheticTaskOptions& o) : o_(o) {}
  std::string name() const override { return "random_tokens"; }

  Prompt make(int64_t index) const override {
    DataRng rng(mix_keys(o_.seed, 0x52414E44ull, static_cast<uint64_t>(index)));
    Prompt p;
    p.token_ids.resize(size_t(o_.prompt_tokens));
    for (auto& t : p.token_ids) t = int32_t(rng.below(uint64_t(o_.vocab_size)));
    p.text = cat("random prompt #", index);
    p.messages.push_back({"user", p.text});
    p.id = index;
    p.source = cat("random_tokens#", index);
    return p;
  }

  reward::RewardResult score(const Prompt&, const std::string&) const noexcept override { return reward::RewardResult{}; }

 private:
  SyntheticTaskOptions o_;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_random_tokens_task(const SyntheticTaskOptions& options) {
  return std::make_unique<RandomTokensTask>(options);
}

}  // namespace hone::data
