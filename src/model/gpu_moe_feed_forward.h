// The mixture-of-experts feed-forward on the GPU: the device twin of model/moe_feed_forward.h (same steps, same
// seams: the layer body's feed-forward, expert parallelism's dispatch and combine), over the CUDA ops of
// cuda/moe_ops.h. The router's logits, probabilities and weights are fp32; rows and weights bf16.
//
//   logits = h2 W_router^T (fp32 GEMM) -> softmax, top-k (or replay) -> routing plan on the device (sort by expert)
//   -> permute -> [dispatch] -> gate, up (grouped GEMMs) -> SwiGLU -> down (grouped GEMM) -> [combine] -> combine
//   with the routing weights
//
// Where its data lives: a layer's saved routing (probabilities, top-k, plan) and, at ep = 1, its expert-side rows
// (T k of them) are carved by the layer body with the layer's other activations (LayerActivations::ffn:
// gpu_moe_saved_bytes), so recompute and the arenas' release treat them as the rest. Under expert parallelism the
// number of rows a rank's experts receive is known only after the counts cross the group: the expert-side rows come
// from the device's stream-ordered memory pool then, released after the layer's backward (or its forward, when
// nothing follows). The experts' GEMMs of a large pass (training, logprobs, prefill) run through cuBLAS, one GEMM per
// expert, after the routing's offsets reach the host; a small one (decode steps, which CUDA graphs capture: nothing
// there waits for the host) runs our one-launch kernel over the offsets on the device.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "cuda/device_memory.h"
#include "model/expert_dispatch.h"
#include "backend/cuda_backend.h"
#include "model/transformer_layer.h"
#include "model/model_config.h"

namespace hone {

// Bytes of a sparse layer's saved region for T rows (0 for a dense model), and of the forward and backward scratch
// its passes use (shared by the layers).
size_t gpu_moe_saved_bytes(const LayerShape& s, int T);
size_t gpu_moe_forward_scratch_bytes(const LayerShape& s, int T);
size_t gpu_moe_backward_scratch_bytes(const LayerShape& s, int T);
// The same as the layer body carves them (model/transformer_layer.h).
inline FeedForwardBytes moe_feed_forward_bytes(CudaBackend, const LayerShape& s, int T) {
  return {gpu_moe_saved_bytes(s, T), gpu_moe_forward_scratch_bytes(s, T), gpu_moe_backward_scratch_bytes(s, T)};
}
// The CUDA backend's feed-forward of c's layers: the dense MLP, or GpuMoeFeedForward for a mixture of experts.
template <>
std::unique_ptr<LayerFeedForward<CudaBackend>> make_layer_feed_forward<CudaBackend>(const ModelConfig& c,
                                                                                    ExpertDispatch<bf16>* dispatch);

class GpuMoeFeedForward final : public LayerFeedForward<CudaBackend> {
 public:
  using bf16 = cuda::bf16;
  using W = LayerWeightPtrs<CudaBackend>;
  using Acts = LayerActivations<CudaBackend>;
  using Scratch = LayerScratch<CudaBackend>;
  using Exec = CudaBackend::Exec;
  // dispatch: expert parallelism's exchange over device rows (null: this rank holds every expert); outlives this.
  GpuMoeFeedForward(const ModelConfig& c, ExpertDispatch<bf16>* dispatch = nullptr);

  // The seam (model/transformer_layer.h), as MoeFeedForward's on the CPU.
  void forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a, const Scratch& scratch,
               LayerCollectives<bf16>* collectives, bf16* y, bf16* out, const Exec& x) override;
  void backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b, const Acts& a,
                const Scratch& scratch, LayerCollectives<bf16>* collectives, bf16* dres, const Exec& x) override;

  // As MoeFeedForward: the weight of the load-balancing loss in the next backwards, and routing replay (forced:
  // device [T, sparse layers, k] of the next forwards' rows, -1 rows keep their top-k; null: none).
  void set_aux_loss_weight(double w) { aux_weight_ = w; }
  // As MoeFeedForward: rows past the first n are padding, out of the load-balancing statistics (-1: none).
  void set_counted_rows(int n) { counted_rows_ = n; }
  void set_forced_routing(const int32_t* forced) { forced_ = forced; }

  // Routing record: with record set (device [T, sparse layers, k] of the next forwards' rows), every sparse layer's
  // forward writes the k experts of each row there (generation's routing, the training forward's for comparison).
  void set_routing_record(int32_t* record) { record_ = record; }

  // The routing of the last forward, on the host (these synchronize the stream): the load-balancing loss and the
  // rows each expert received from this rank per sparse layer [sparse layers x E].
  double aux_loss(const cuda::GpuContext& ctx);
  std::vector<int32_t> expert_counts(const cuda::GpuContext& ctx);
  int num_sparse_layers() const { return sparse_layers_; }
  int sparse_index(int layer) const { return layer_sparse_[size_t(layer)]; }  // -1 for a dense layer

  // Frees the pool memory of expert parallelism's rows still held (the arenas' release).
  void release(const Exec& x) override;

 private:
  struct Pool;  // expert-side rows of one layer under expert parallelism
  // A sparse layer over all T rows: y this rank's partial output; the backward adds d(loss)/d(h2) into dh.
  void sparse_forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a,
                      const Scratch& scratch, bf16* y, const cuda::GpuContext& ctx, GpuOpProfiler* prof);
  void sparse_backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b,
                       const Acts& a, const Scratch& scratch, const bf16* dy, bf16* dh, const cuda::GpuContext& ctx,
                       GpuOpProfiler* prof);
  bool sparse(int layer) const { return layer_sparse_[size_t(layer)] >= 0; }

  int E_ = 0, k_ = 0, L_ = 0;
  ExpertDispatch<bf16>* dispatch_ = nullptr;
  DenseFeedForward<CudaBackend> dense_;
  std::vector<int> layer_sparse_;
  int sparse_layers_ = 0;
  double aux_weight_ = 0;
  int counted_rows_ = -1;
  const int32_t* forced_ = nullptr;
  int32_t* record_ = nullptr;
  // Per sparse layer, written by its forward: the counted rows, expert counts [S, E] and probability sums [S, E]
  // (device).
  std::vector<int> rows_;
  DeviceArray<int32_t> counts_;
  DeviceArray<float> prob_sum_, daux_;
  // Expert parallelism: per layer, the expert-side row offsets (device) and the rows' pool memory.
  std::vector<DeviceArray<int32_t>> expert_offsets_;
  std::vector<int64_t> expert_rows_;
  std::vector<void*> pool_;
  std::vector<int32_t> host_offsets_;
  // Per layer, the expert-side row offsets on the host when its last forward ran the experts' GEMMs through cuBLAS
  // (empty: the kernel ran them; the backward follows the forward's choice).
  std::vector<std::vector<int32_t>> host_eo_;
  std::vector<int64_t> host_counts_, host_expert_counts_;
};

}  // namespace hone

#endif  // HONE_CUDA
