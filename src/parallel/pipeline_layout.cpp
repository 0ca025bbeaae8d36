// The split of the layers into pipeline chunks (pipeline_layout.h).
#include "parallel/pipeline_layout.h"

#include "runtime/error.h"

namespace hone {

PipelineLayout PipelineLayout::of(int num_layers, int pp, int vpp, const std::vector<int64_t>& chunk_layers) {
  HONE_CHECK(num_layers >= 1, "a model of ", num_layers, " layers");
  HONE_USER_CHECK(pp >= 1, "parallel.pp = ", pp, " must be at least 1");
  HONE_USER_CHECK(vpp >= 1, "parallel.vpp = ", vpp, " must be at least 1");
  HONE_USER_CHECK(vpp == 1 || pp > 1, "parallel.vpp = ", vpp,
                  " interleaves the stages of a pipeline: it needs parallel.pp > 1 (set parallel.vpp = 1)");
  PipelineLayout p;
  p.num_layers_ = num_layers, p.pp_ = pp, p.vpp_ = vpp;
  const int chunks = pp * vpp;
  p.begin_.assign(size_t(chunks) + 1, 0);
  if (chunk_layers.empty()) {
    HONE_USER_CHECK(num_layers % chunks == 0, "the model's ", num_layers, num_layers == 1 ? " layer" : " layers",
                    " cannot be split evenly over ", chunks, " pipeline chunks (parallel.pp = ", pp, " x parallel.vpp = ", vpp,
                    "): list each chunk's layers in parallel.pp_layers, or change parallel.pp / parallel.vpp");
    for (int k = 0; k <= chunks; ++k) p.begin_[size_t(k)] = k * (num_layers / chunks);
    return p;
  }
  HONE_USER_CHECK(int64_t(chunk_layers.size()) == chunks, "parallel.pp_layers lists ", chunk_layers.size(),
                  " chunks but parallel.pp x parallel.vpp = ", pp, " x ", vpp, " = ", chunks,
                  " (one entry per model chunk, in model order)");
  int64_t total = 0;
  for (int k = 0; k < chunks; ++k) {
    const int64_t n = chunk_layers[size_t(k)];
    HONE_USER_CHECK(n >= 0, "parallel.pp_layers[", k, "] = ", n, ": a chunk holds zero or more layers");
    total += n;
    HONE_USER_CHECK(total <= num_layers, "parallel.pp_layers sums past the model's ", num_layers, " layers");
    p.begin_[size_t(k) + 1] = int(total);
  }
  HONE_USER_CHECK(total == num_layers, "parallel.pp_layers sums to ", total, " layers but the model has ",
                  num_layers);
  return p;
}

int PipelineLayout::rank_of_layer(int layer) const {
  HONE_CHECK(layer >= 0 && layer < num_layers_, "layer ", layer, " outside a model of ", num_layers_);
  for (int k = 0; k < num_chunks(); ++k)
    if (layer < layer_end(k)) return rank_of_chunk(k);
  return pp_ - 1;
}

std::vector<int> PipelineLayout::layers_of(int pp_rank) const {
  std::vector<int> out;
  for (int v = 0; v < vpp_; ++v) {
    const int k = model_chunk(pp_rank, v);
    for (int l = layer_begin(k); l < layer_end(k); ++l) out.push_back(l);
  }
  return out;
}

}  // namespace hone
