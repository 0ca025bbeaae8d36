// LayerShape: the sizes one rank's layers and kernels compute with, from the model's config and the tensor- and
// expert-parallel sizes: this rank's attention heads and KV heads, its slice of the feed-forward width and of the
// vocabulary, and (mixture of experts) the experts it holds and its slice of their width. Layers take a
// LayerShape, never the HF config, so a sharded layer is the same code as a whole one.
//
// Megatron's split over T tensor-parallel ranks: q heads and the intermediate size are divided by T; KV heads are
// divided when T divides them and otherwise replicated (T a multiple of the KV heads: each rank keeps the one KV
// head its q heads read); the vocabulary is padded up to a multiple of T and split in equal slices. Experts are
// split whole over the EP expert-parallel ranks (rank r holds experts [r E/EP, (r+1) E/EP)) and each expert's width
// over T, as the dense MLP's (Megatron's expert tensor parallelism equal to tp).
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
  int intermediate = 0;  // this rank's slice of the dense feed-forward width (0 when every layer is sparse)
  int vocab = 0;         // this rank's slice of the (padded) vocabulary
  int vocab_begin = 0;   // the first vocabulary id of the slice
  int vocab_total = 0;   // the model's vocabulary (unpadded)
  bool qk_norm = false;  // per-head RMSNorm of q and k (Qwen3)
  bool bias = false;     // q/k/v biases (Qwen2)
  float eps = 1e-6f;     // RMSNorm epsilon
  int tp = 1;            // tensor-parallel ranks the shape is a slice for
  int tp_rank = 0;
  // Mixture of experts (experts_total == 0: a dense model).
  int experts_total = 0;     // E: the router's outputs
  int experts = 0;           // experts this rank holds
  int expert_begin = 0;      // the first of them
  int top_k = 0;             // experts per token
  int moe_intermediate = 0;  // this rank's slice of an expert's width
  bool norm_topk_prob = false;
  int ep = 1;                // expert-parallel ranks
  int ep_rank = 0;

  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  float attention_scale() const;  // 1 / sqrt(head_dim)
};

// This rank's shape; tp = ep = 1 gives the whole model. Throws UserError naming parallel.tp (parallel.ep), the
// dimension it does not divide and the values that would.
LayerShape layer_shape(const ModelConfig& c, int tp = 1, int tp_rank = 0, int ep = 1, int ep_rank = 0);

}  // namespace hone
