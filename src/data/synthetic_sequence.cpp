// The sort and reverse tasks: "sort:dbca=" -> "abcd", "rev:dbca=" -> "acbd" (letters a-z or digits 0-9).
#include <algorithm>
#include <vector>

#include "data/data_rng.h"
#include "data/synthetic_tasks.h"
#include "runtime/error.h"

namespace hone::data {

namespace {

// The length of the longest common subsequence of a and b (one row of the dynamic program: O(|a| |b|) time, O(|b|)
// memory; b is the expected answer, at most 64 characters).
size_t longest_common_subsequence(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1, 0);
  for (char x : a) {
    size_t diagonal = 0;  // row[j] of the previous character of a
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = x == b[j - 1] ? diagonal + 1 : std::max(up, row[j - 1]);
      diagonal = up;
    }
  }
  return row[b.size()];
}

class SequenceTask : public SyntheticTask {
 public:
  explicit SequenceTask(const SyntheticTaskOptions& o) : o_(o), sort_(o.task == "sort") {}
  std::string name() const override { return o_.task; }

  Prompt make(int64_t index) const override {
    DataRng rng(mix_keys(o_.seed, sort_ ? 0x534F5254ull : 0x524556ull, static_cast<uint64_t>(index)));
    const bool letters = o_.alphabet == "letters";
    int64_t len = rng.range(o_.min_length, o_.max_length);
    std::string s;
    for (int64_t i = 0; i < len; ++i) s += static_cast<char>(letters ? 'a' + rng.below(26) : '0' + rng.below(10));
    std::string answer = s;
    if (sort_)
      std::sort(answer.begin(), answer.end());
    else
      std::reverse(answer.begin(), answer.end());
    Prompt p;
    p.text = (sort_ ? "sort:" : "rev:") + s + "=";
    p.messages.push_back({"user", p.text});
    p.answer = answer;
    p.id = index;
    p.source = cat(o_.task, "#", index);
    return p;
  }

  // Correct when the completion's first line equals the answer exactly. formatted: the line has the right length
  // and only characters of the alphabet. With partial credit a wrong line earns the longest common subsequence of
  // the line and the answer over the longer of the two: the answer's characters in its order count, extra
  // characters cost, and only the exact answer reaches 1.
  reward::RewardResult score(const Prompt& prompt, const std::string& completion) const noexcept override {
    reward::RewardResult r;
    try {
      r.extracted = first_line_answer(completion);
      const bool letters = o_.alphabet == "letters";
      r.formatted = r.extracted.size() == prompt.answer.size() &&
                    std::all_of(r.extracted.begin(), r.extracted.end(), [&](char c) {
                      return letters ? (c >= 'a' && c <= 'z') : (c >= '0' && c <= '9');
                    });
      r.correct = !prompt.answer.empty() && r.extracted == prompt.answer;
      r.reward = r.correct ? 1.0 : 0.0;
      if (!r.correct && o_.partial_credit && !prompt.answer.empty())
        r.reward = double(longest_common_subsequence(r.extracted, prompt.answer)) /
                   double(std::max(r.extracted.size(), prompt.answer.size()));
    } catch (...) {
      r = reward::RewardResult{};
    }
    return r;
  }

 private:
  SyntheticTaskOptions o_;
  bool sort_;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_sequence_task(const SyntheticTaskOptions& options) {
  return std::make_unique<SequenceTask>(options);
}

}  // namespace hone::data
