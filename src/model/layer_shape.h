// LayerShape: the sizes one rank's layers and kernels compute with, from the model's config and the tensor-parallel
// size: this rank's attention heads and KV heads, its slice of the feed-forward width and of the vocabulary. Layers
// take a LayerShape, never the HF config, so a sharded layer is the same code as a whole one.
//
// Megatron's split over T tensor-parallel ranks: q heads and the intermediate size are divided by T; KV heads are
// divided when T divides them and otherwise replicated (T a multiple of the KV heads: each rank keeps the one KV
// head its q heads read); the vocabulary is padded up to a multiple of T and split in equal slices.
// Plain header: .cu-safe.
#pragma once

#include <cstdint>

namespace hone {

struct ModelConfig;

struct LayerShape {
  int hidden = 0;        // C: the residual stream is whole on every rank
  int heads = 0;         // attention (query) heads on this rank
  int kv_heads = 0;      // KV heads on this rank
  int head_dim = 0;      // D
  int intermediate = 0;  // this rank's slice of the feed-forward width
  int vocab = 0;         // this rank's slice of the (padded) vocabulary
  int vocab_begin = 0;   // the first vocabulary id of the slice
  int vocab_total = 0;   // the model's vocabulary (unpadded)
  bool qk_norm = false;  // per-head RMSNorm of q and k (Qwen3)
  bool bias = false;     // q/k/v biases (Qwen2)
  float eps = 1e-6f;     // RMSNorm epsilon
  int tp = 1;            // tensor-parallel ranks the shape is a slice for
  int tp_rank = 0;

  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  float attention_scale() const;  // 1 / sqrt(head_dim)
};

// This rank's shape; tp = 1 gives the whole model. Throws UserError naming parallel.tp, the dimension that tp does
// not divide and the values of tp that would.
LayerShape layer_shape(const ModelConfig& c, int tp = 1, int tp_rank = 0);

}  // namespace hone
