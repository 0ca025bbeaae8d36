// The resharding plan and its execution over the backend (reshard.h).
#include "parallel/reshard.h"

#include <algorithm>

#include "backend/strided_copy.h"
#include "model/model_config.h"
#include "parallel/shard_layout.h"
#include "runtime/error.h"

namespace hone {

namespace {

// The piece [a, b) (along the split dimension) of parameter `p` from a training shard `src` to a generation shard
// `dst`, as one block in the two flat buffers.
ReshardBlock block_of(const ParamShard& src, const ParamShard& dst, int64_t a, int64_t b) {
  ReshardBlock blk;
  const auto& shape = src.spec.shape;
  if (src.slice.dim < 0) {
    blk.src = src.offset, blk.dst = dst.offset, blk.cols = src.spec.numel();
    return blk;
  }
  if (src.slice.dim == 0) {
    int64_t row = 1;
    for (size_t d = 1; d < shape.size(); ++d) row *= shape[d];
    blk.src = src.offset + (a - src.slice.begin) * row;
    blk.dst = dst.offset + (a - dst.slice.begin) * row;
    blk.cols = (b - a) * row;
    return blk;
  }
  HONE_CHECK(src.slice.dim == 1 && shape.size() == 2, "a split along dimension ", src.slice.dim, " of ",
             src.spec.name);
  blk.src = src.offset + (a - src.slice.begin);
  blk.dst = dst.offset + (a - dst.slice.begin);
  blk.rows = shape[0];
  blk.cols = b - a;
  blk.src_pitch = src.local_shape[1];
  blk.dst_pitch = dst.local_shape[1];
  return blk;
}

int64_t valid_end(const ShardSlice& s) { return std::min(s.begin + s.count, s.valid_end); }

}  // namespace

ReshardPlan plan_reshard(const ModelConfig& c, const RankGrid& grid, const PipelineLayout& pipe, int tg, int me,
                         int64_t round_elements) {
  const int world = grid.world_size(), tp = grid.tp();
  HONE_CHECK(tg >= 1 && world % tg == 0, "generation.tp ", tg, " over ", world, " ranks");
  HONE_CHECK(me >= 0 && me < world, "rank ", me, " of ", world);
  // Every training stage shard and every generation shard, once.
  std::vector<std::vector<ShardLayout>> train(static_cast<size_t>(tp));  // [t][stage]
  for (int t = 0; t < tp; ++t)
    for (int s = 0; s < pipe.pp(); ++s) train[size_t(t)].push_back(ShardLayout::of(c, tp, t, &pipe, s));
  std::vector<ShardLayout> gen;
  for (int g = 0; g < tg; ++g) gen.push_back(ShardLayout::of(c, tg, g));
  const std::vector<ParamSpec> table = param_table(c);
  std::vector<int> owner(table.size(), 0);
  for (size_t k = 0; k < table.size(); ++k)
    while (!stage_holds(pipe, owner[k], c, table[k])) ++owner[k];
  // Rounds: consecutive parameters of at most round_elements whole elements.
  std::vector<int> round_of(table.size(), 0);
  int rounds = 1;
  for (size_t k = 0, acc = 0; k < table.size(); ++k) {
    const int64_t n = table[k].numel();
    if (acc > 0 && int64_t(acc) + n > round_elements) ++rounds, acc = 0;
    round_of[k] = rounds - 1;
    acc += size_t(n);
  }

  ReshardPlan plan;
  plan.train_numel = train[size_t(grid.coord(me).tp)][size_t(grid.coord(me).pp)].num_local_params();
  plan.gen_numel = gen[size_t(me % tg)].num_local_params();
  plan.rounds.resize(size_t(rounds));
  for (ReshardRound& r : plan.rounds) {
    r.send.resize(size_t(world));
    r.recv.resize(size_t(world));
    r.send_counts.assign(size_t(world), 0);
    r.recv_counts.assign(size_t(world), 0);
  }
  const RankCoord mine = grid.coord(me);
  for (int w = 0; w < world; ++w) {
    const RankCoord cw = grid.coord(w);
    // This rank serves destination w only when both share the data- and context-parallel place.
    if (w != me && (cw.dp != mine.dp || cw.cp != mine.cp)) continue;
    const ShardLayout& dst_layout = gen[size_t(w % tg)];
    for (size_t k = 0; k < table.size(); ++k) {
      const ParamShard& d = dst_layout.params()[k];
      HONE_CHECK(d.spec.name == table[k].name, "generation layout out of the table's order at ", table[k].name);
      const int stage = owner[k];
      ReshardRound& round = plan.rounds[size_t(round_of[k])];
      auto add = [&](int t, const ReshardBlock& blk) {
        const int src_rank = grid.rank({cw.dp, t, stage, cw.cp});
        if (src_rank != me && w != me) return;
        if (src_rank == me && w == me) {
          round.local.push_back(blk);
          plan.elements_local += blk.numel();
        } else if (src_rank == me) {
          ReshardBlock b = blk;
          b.dst = round.send_counts[size_t(w)];  // packed, from this peer's displacement
          b.dst_pitch = b.cols;
          round.send[size_t(w)].push_back(b);
          round.send_counts[size_t(w)] += blk.numel();
        } else {
          ReshardBlock b = blk;
          b.src = round.recv_counts[size_t(src_rank)];
          b.src_pitch = b.cols;
          round.recv[size_t(src_rank)].push_back(b);
          round.recv_counts[size_t(src_rank)] += blk.numel();
          plan.elements_received += blk.numel();
        }
      };
      if (d.slice.dim < 0) {  // replicated: the whole tensor from the destination's own tensor-parallel place
        const int t = cw.tp % tp;
        add(t, block_of(train[size_t(t)][size_t(stage)].find(d.spec.name), d, 0, 0));
        continue;
      }
      // Split: each piece of the destination's valid range from the first training rank holding it.
      int64_t covered = d.slice.begin;
      const int64_t end = valid_end(d.slice);
      for (int t = 0; t < tp && covered < end; ++t) {
        const ParamShard& s = train[size_t(t)][size_t(stage)].find(d.spec.name);
        const int64_t a = std::max(covered, s.slice.begin), b = std::min(end, valid_end(s.slice));
        if (a >= b) continue;
        add(t, block_of(s, d, a, b));
        covered = b;
      }
      HONE_CHECK(covered >= end, "no training shard holds rows [", covered, ", ", end, ") of ", d.spec.name);
    }
  }
  for (ReshardRound& r : plan.rounds) {
    r.send_displs.assign(size_t(world), 0);
    r.recv_displs.assign(size_t(world), 0);
    for (int w = 0; w < world; ++w) {
      r.send_displs[size_t(w)] = r.send_total;
      r.recv_displs[size_t(w)] = r.recv_total;
      r.send_total += r.send_counts[size_t(w)];
      r.recv_total += r.recv_counts[size_t(w)];
    }
    plan.send_capacity = std::max(plan.send_capacity, r.send_total);
    plan.recv_capacity = std::max(plan.recv_capacity, r.recv_total);
  }
  return plan;
}

template <typename B>
Resharder<B>::Resharder(ReshardPlan plan, Comm& world, typename B::Exec x)
    : plan_(std::move(plan)),
      world_(world),
      x_(x),
      send_(std::max<int64_t>(1, plan_.send_capacity), "refit send staging"),
      recv_(std::max<int64_t>(1, plan_.recv_capacity), "refit receive staging") {
  HONE_CHECK(world.on_device() == B::kDeviceMemory, "the ", B::kName, " resharder needs a ",
             B::kDeviceMemory ? "device" : "host", " Comm of the world");
}

template <typename B>
void Resharder<B>::copy(const std::vector<ReshardBlock>& blocks, const Act* src, Act* dst) {
  constexpr size_t e = sizeof(Act);
  for (const ReshardBlock& b : blocks) {
    const size_t width = size_t(b.cols) * e;
    const size_t spitch = b.rows > 1 ? size_t(b.src_pitch) * e : width;
    const size_t dpitch = b.rows > 1 ? size_t(b.dst_pitch) * e : width;
    copy_2d(x_, dst + b.dst, dpitch, src + b.src, spitch, width, size_t(b.rows));
  }
}

template <typename B>
void Resharder<B>::run(const Act* train, Act* gen) {
  constexpr CommType type = sizeof(Act) == 2 ? CommType::bf16 : CommType::f32;
  for (const ReshardRound& r : plan_.rounds) {
    HONE_CHECK(int(r.send_counts.size()) == world_.size(), "a plan for ", r.send_counts.size(), " ranks on the ",
               world_.describe());
    for (size_t w = 0; w < r.send.size(); ++w) copy(r.send[w], train, send_.get() + r.send_displs[w]);
    world_.all_to_allv_raw(send_.get(), r.send_counts, r.send_displs, recv_.get(), r.recv_counts, r.recv_displs,
                           type);
    copy(r.local, train, gen);
    for (size_t w = 0; w < r.recv.size(); ++w) copy(r.recv[w], recv_.get() + r.recv_displs[w], gen);
  }
}

#define HONE_INSTANTIATE_RESHARDER(B) template class Resharder<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_RESHARDER)
#undef HONE_INSTANTIATE_RESHARDER

}  // namespace hone
