// Packing a step's rollouts into micro-batches (see grpo_batch.h).
#include "rl/grpo_batch.h"

namespace hone::rl {

std::vector<std::vector<int64_t>> pack_samples(const std::vector<GrpoSample>& samples,
                                               const std::vector<int64_t>& which, int64_t max_tokens,
                                               Packing* packing) {
  std::vector<int64_t> lengths;
  lengths.reserve(which.size());
  for (int64_t i : which) lengths.push_back(samples[size_t(i)].length());
  Packing p = pack_sequences(lengths, max_tokens);
  std::vector<std::vector<int64_t>> out;
  for (const auto& bin : p.bins) {
    std::vector<int64_t> mb;
    for (int64_t k : bin) mb.push_back(which[size_t(k)]);
    out.push_back(std::move(mb));
  }
  if (packing) *packing = std::move(p);
  return out;
}

MicroBatch build_micro_batch(const std::vector<GrpoSample>& samples, const std::vector<int64_t>& which) {
  MicroBatch mb;
  mb.samples = which;
  std::vector<int32_t> ids;
  std::vector<uint8_t> predict;
  for (int64_t i : which) {
    const GrpoSample& s = samples[size_t(i)];
    const auto& pr = s.rollout.prompt;
    const auto& co = s.rollout.completion;
    ids.assign(pr.begin(), pr.end());
    ids.insert(ids.end(), co.begin(), co.end());
    const size_t n = ids.size();
    predict.assign(n > 0 ? n - 1 : 0, 0);
    for (size_t j = 0; j < co.size(); ++j) predict[pr.size() - 1 + j] = 1;
    const int64_t begin = mb.batch.num_tokens();
    mb.batch.append(ids.data(), int(n), predict.data());
    mb.mask.resize(size_t(begin) + n, 0);
    mb.gen.resize(size_t(begin) + n, 0.f);
    mb.old.resize(size_t(begin) + n, 0.f);
    mb.ref.resize(size_t(begin) + n, 0.f);
    for (size_t j = 0; j < co.size(); ++j) {
      const size_t row = size_t(begin) + pr.size() - 1 + j;
      mb.mask[row] = s.trained ? 1 : 0;
      mb.gen[row] = s.rollout.logprobs[j];
    }
    mb.advantages.push_back(s.advantage);
    const auto& routing = s.rollout.routing;
    if (!routing.empty() && n > 1) {
      const int width = int(routing.size() / (n - 1));
      if (mb.routing_width == 0) mb.routing_width = width;
      if (width == mb.routing_width) {
        mb.gen_routing.resize(size_t(begin + int64_t(n)) * size_t(width), -1);
        for (size_t i = 0; i < routing.size(); ++i) mb.gen_routing[size_t(begin) * size_t(width) + i] = routing[i];
      }
    }
  }
  if (mb.routing_width > 0) mb.gen_routing.resize(size_t(mb.batch.num_tokens()) * size_t(mb.routing_width), -1);
  mb.seq_offsets.assign(mb.batch.cu_seqlens.begin(), mb.batch.cu_seqlens.end());
  return mb;
}

PackedBatch empty_pass_batch() {
  PackedBatch b;
  const int32_t id = 0;
  b.append(&id, 1);
  return b;
}

std::vector<float> completion_values(const MicroBatch& mb, int seq, const float* row_values,
                                     const std::vector<GrpoSample>& samples) {
  const GrpoSample& s = samples[size_t(mb.samples[size_t(seq)])];
  const size_t first = size_t(mb.batch.seq_begin(seq)) + s.rollout.prompt.size() - 1;
  return std::vector<float>(row_values + first, row_values + first + s.rollout.completion.size());
}

}  // namespace hone::rl
