// Megatron's embedding group: the first and the last pipeline stage of one tensor-, context- and data-parallel
// place, which both hold the tied embedding (the first as its embedding, the last as its LM head:
// parallel/shard_layout.h). Their two copies' gradients are summed over this pair before the optimizer, so that the
// two copies stay equal. A host communicator of the pair, made by MPI_Comm_split of the world (collective over it);
// other stages are members of no pair. The CPU engine exchanges over the pipeline group instead
// (parallel/pipeline_model.h); the GPU engine makes an NCCL communicator over this one.
#pragma once

#include <memory>

#include "comm/comm.h"
#include "runtime/rank_grid.h"

namespace hone {

class EmbeddingGroup {
 public:
  // Collective over the world. Without pipeline stages (pp = 1) nobody is a member.
  EmbeddingGroup(const RankGrid& grid, int world_rank);
  ~EmbeddingGroup();
  EmbeddingGroup(const EmbeddingGroup&) = delete;
  EmbeddingGroup& operator=(const EmbeddingGroup&) = delete;

  bool member() const;
  Comm& host() const;  // members only: the pair, first stage as rank 0

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hone
