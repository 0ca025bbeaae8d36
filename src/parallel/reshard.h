// The resharding refit: every generation replica's weights (the whole model sharded generation.tp = Tg ways,
// parallel/generation_layout.h) assembled from the training shards (parallel.tp ways, each pipeline stage its own
// layers: parallel/shard_layout.h) by all-to-all transfers over the world, into buffers allocated once. The plan is a
// pure function of the two layouts: for each parameter, which training rank holds each piece a generation rank
// needs, as contiguous or strided blocks (a row-parallel weight's columns are a strided block). A piece comes from
// the training rank of the destination's own data- and context-parallel place (so each data-parallel column serves
// its own replicas); what a rank needs from itself is copied locally. The transfers run in rounds of at most a
// bounded number of whole-model elements, so the staging buffers stay small next to the weights.
//
// One Resharder<B> runs the plan over the backend: fp32 over a host (MPI) Comm on the CPU, bf16 over a device
// (NCCL) Comm on the engine's stream on the GPU, with no host round trip. Each round packs this rank's blocks into a
// staging buffer allocated once (strided blocks by copy_2d, backend/strided_copy.h), one all-to-all moves them, and
// the received blocks are unpacked into the generation weights; what a rank needs from itself is copied directly.
// Equal layouts need no plan: refit stays a copy or a cast in place.
//
//   Resharder<CpuBackend> r(plan_reshard(config, grid, pipeline, /*tg=*/4, world_rank), ps.world());
//   r.run(train_weights.flat.f32(), gen_weights.flat.f32());   // collective over the world
// Plain header.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "comm/comm.h"
#include "parallel/pipeline_layout.h"
#include "runtime/rank_grid.h"

namespace hone {

struct ModelConfig;

// rows x cols elements: row i at src + i src_pitch and at dst + i dst_pitch (a contiguous block: rows = 1).
struct ReshardBlock {
  int64_t src = 0, dst = 0;
  int64_t rows = 1, cols = 0;
  int64_t src_pitch = 0, dst_pitch = 0;
  int64_t numel() const { return rows * cols; }
};

// One round of the exchange, as this rank sees it. Per world rank r: send[r] packs blocks of this rank's training
// shard (src: its flat offset) into the send staging (dst: offset from send_displs[r]); recv[r] unpacks the block r
// sent (src: offset from recv_displs[r]) into the generation shard (dst: its flat offset). Counts and
// displacements in elements; this rank's own entries are 0 (local covers it).
struct ReshardRound {
  std::vector<std::vector<ReshardBlock>> send, recv;
  std::vector<int64_t> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<ReshardBlock> local;  // training flat -> generation flat, no transfer
  int64_t send_total = 0, recv_total = 0;
};

struct ReshardPlan {
  std::vector<ReshardRound> rounds;
  int64_t send_capacity = 0, recv_capacity = 0;  // the largest round's staging, elements
  int64_t elements_received = 0;                  // from other ranks, over all rounds
  int64_t elements_local = 0;
  int64_t train_numel = 0, gen_numel = 0;         // this rank's flat buffers
};

// The plan of world rank `me`: training shards of grid (tp, pp; the pipeline split `pipe`) to generation shards of
// tg consecutive ranks. round_elements bounds each round's whole-model elements (a parameter larger than that is a
// round of its own).
ReshardPlan plan_reshard(const ModelConfig& c, const RankGrid& grid, const PipelineLayout& pipe, int tg, int me,
                         int64_t round_elements = int64_t(1) << 28);

// Copies the blocks from src to dst (host memory), each element of type T.
template <typename T>
void copy_blocks(const std::vector<ReshardBlock>& blocks, const T* src, T* dst) {
  for (const ReshardBlock& b : blocks)
    for (int64_t i = 0; i < b.rows; ++i) {
      const T* s = src + b.src + i * b.src_pitch;
      T* d = dst + b.dst + i * b.dst_pitch;
      for (int64_t j = 0; j < b.cols; ++j) d[j] = s[j];
    }
}

// The refit under differing layouts over backend B: B::Act values (fp32 on the CPU, bf16 on the GPU) over a Comm
// of the world in B's memory (a host Comm on the CPU; on the GPU a device Comm ordered on the Exec's stream).
template <typename B>
class Resharder {
 public:
  using Act = typename B::Act;
  // world and the Exec's context must outlive this object.
  Resharder(ReshardPlan plan, Comm& world, typename B::Exec x = {});
  const ReshardPlan& plan() const { return plan_; }
  // Collective over the world (every rank, in the same order): gen receives this rank's generation shard of
  // train's values (both flat, in B's memory). Queued on the stream on the GPU.
  void run(const Act* train, Act* gen);
  size_t staging_bytes() const { return send_.bytes() + recv_.bytes(); }

 private:
  void copy(const std::vector<ReshardBlock>& blocks, const Act* src, Act* dst);
  ReshardPlan plan_;
  Comm& world_;
  typename B::Exec x_;
  typename B::template Array<Act> send_, recv_;  // staging, allocated once
};

}  // namespace hone
