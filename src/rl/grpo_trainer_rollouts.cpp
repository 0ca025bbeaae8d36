// output.rollouts = "all": every rollout of the step, gathered in global order onto data-parallel rank 0 for the
// output (io/rollout_file.h). Collective over the data-parallel ranks.
#include <algorithm>
#include <cstring>

#include "comm/host_collectives.h"
#include "io/rollout_file.h"
#include "rl/grpo_trainer_state.h"
#include "runtime/error.h"

namespace hone::rl {

namespace {

class Writer {
 public:
  template <typename T>
  void num(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    num(uint64_t(s.size()));
    out_ += s;
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T num() {
    T v{};
    HONE_CHECK(at_ + sizeof v <= in_.size(), "short rollout record");
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str() {
    const uint64_t n = num<uint64_t>();
    HONE_CHECK(at_ + n <= in_.size(), "short rollout record");
    std::string s = in_.substr(at_, n);
    at_ += n;
    return s;
  }
  bool done() const { return at_ >= in_.size(); }

 private:
  const std::string& in_;
  size_t at_ = 0;
};

void put(Writer& w, int64_t position, const RolloutRecord& r) {
  w.num(position);
  w.num(r.group);
  w.num(r.prompt_id);
  w.str(r.prompt);
  w.str(r.completion);
  w.str(r.answer);
  w.num(r.reward);
  w.num(uint8_t(r.correct));
  w.num(r.advantage);
  w.num(uint8_t(r.trained));
  w.num(r.prompt_tokens);
  w.num(r.completion_tokens);
  w.num(uint8_t(r.truncated));
  w.num(r.logprob_sum);
  w.num(uint64_t(r.scores.size()));
  for (const auto& [name, value] : r.scores) {
    w.str(name);
    w.num(value);
  }
}

RolloutRecord get(Reader& rd, int64_t* position) {
  RolloutRecord r;
  *position = rd.num<int64_t>();
  r.group = rd.num<int64_t>();
  r.prompt_id = rd.num<int64_t>();
  r.prompt = rd.str();
  r.completion = rd.str();
  r.answer = rd.str();
  r.reward = rd.num<double>();
  r.correct = rd.num<uint8_t>() != 0;
  r.advantage = rd.num<double>();
  r.trained = rd.num<uint8_t>() != 0;
  r.prompt_tokens = rd.num<int64_t>();
  r.completion_tokens = rd.num<int64_t>();
  r.truncated = rd.num<uint8_t>() != 0;
  r.logprob_sum = rd.num<double>();
  const uint64_t n = rd.num<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    std::string name = rd.str();
    r.scores.emplace_back(std::move(name), rd.num<double>());
  }
  return r;
}

}  // namespace

void GrpoTrainer::record_rollouts(const StepState& st, StepRow& row) {
  const int64_t G = s_.generations;
  Writer w;
  for (const GrpoSample& s : st.samples) {
    const Prompt& p = st.prompts[size_t(s.prompt_index)];
    RolloutRecord r;
    r.group = s.position / G;
    r.prompt_id = p.id;
    r.prompt = tok_->decode(s.rollout.prompt, false);
    r.completion = s.rollout.text;
    r.answer = p.answer;
    r.reward = s.reward;
    r.correct = s.correct;
    r.advantage = s.advantage;
    r.trained = s.trained;
    r.prompt_tokens = int64_t(s.rollout.prompt.size());
    r.completion_tokens = int64_t(s.rollout.completion.size());
    r.truncated = s.rollout.finish_reason == FinishReason::length;
    double sum = 0;
    for (float lp : s.rollout.logprobs) sum += lp;
    r.logprob_sum = sum;
    for (const RewardScore& sc : s.scores) r.scores.emplace_back(sc.name, sc.value);
    put(w, s.position, r);
  }
  const std::vector<std::string> parts = gather_strings(ps_.dp(), w.bytes());
  if (ps_.dp_rank() != 0) return;
  std::vector<std::pair<int64_t, RolloutRecord>> all;
  for (const std::string& part : parts) {
    Reader rd(part);
    while (!rd.done()) {
      int64_t position = 0;
      RolloutRecord r = get(rd, &position);
      all.emplace_back(position, std::move(r));
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto table = std::make_shared<RolloutTable>();
  table->step = st.step;
  table->rows.reserve(all.size());
  for (auto& [position, r] : all) table->rows.push_back(std::move(r));
  row.set_rollouts(std::move(table));
}

}  // namespace hone::rl
