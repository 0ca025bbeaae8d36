// Building a pipeline rank's action list (pipeline_schedule.h): the compute order of the schedule, then one
// exchange between consecutive compute actions carrying what the first produced and what the second needs.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <tuple>

#include "runtime/error.h"

namespace hone {

std::string PipelineSchedule::name() const {
  const std::string base = forward_only ? "forward-only" : "1F1B";
  return vpp > 1 ? cat("interleaved ", base, " (vpp ", vpp, ")") : base;
}

int PipelineSchedule::scheduled_microbatches() const {
  if (vpp == 1 || forward_only) return microbatches;
  return (microbatches + pp - 1) / pp * pp;
}

double PipelineSchedule::bubble_formula() const {
  const double denom = double(vpp) * microbatches + pp - 1;
  return denom > 0 ? double(pp - 1) / denom : 0.0;
}

namespace {

PipeAction compute(PipeAction::Kind k, int mb, int chunk) {
  PipeAction a;
  a.kind = k;
  a.microbatch = mb;
  a.chunk = chunk;
  return a;
}

// The (micro-batch, chunk) order of forwards under interleaving: groups of pp micro-batches (the last one may be
// smaller), each group through chunk 0, then chunk 1, ... Megatron's schedule table.
std::vector<std::pair<int, int>> interleaved_table(int m, int pp, int vpp) {
  std::vector<std::pair<int, int>> t;
  for (int g0 = 0; g0 < m; g0 += pp) {
    const int g1 = std::min(m, g0 + pp);
    for (int v = 0; v < vpp; ++v)
      for (int mb = g0; mb < g1; ++mb) t.push_back({mb, v});
  }
  return t;
}

}  // namespace

namespace {

// The compute actions in order, cut into steps: the actions between two exchanges. 1F1B exchanges after every
// action; interleaving runs a steady-state forward and its backward as one step (Megatron's
// send_forward_backward_recv_forward_backward after the pair).
std::vector<std::vector<PipeAction>> compute_steps(const PipelineSchedule& s, int r) {
  HONE_CHECK(s.pp >= 1 && s.vpp >= 1 && s.microbatches >= 0, "pipeline of ", s.pp, " ranks, ", s.vpp,
             " chunks each, ", s.microbatches, " micro-batches");
  HONE_CHECK(r >= 0 && r < s.pp, "pipeline rank ", r, " of ", s.pp);
  using K = PipeAction::Kind;
  const int m = s.microbatches, P = s.pp, V = s.vpp;
  std::vector<std::vector<PipeAction>> out;
  if (V == 1) {
    if (s.forward_only) {
      for (int i = 0; i < m; ++i) out.push_back({compute(K::forward, i, 0)});
      return out;
    }
    const int warmup = std::min(P - r - 1, m);
    for (int i = 0; i < warmup; ++i) out.push_back({compute(K::forward, i, 0)});
    for (int i = 0; i < m - warmup; ++i) {
      out.push_back({compute(K::forward, warmup + i, 0)});
      out.push_back({compute(K::backward, i, 0)});
    }
    for (int i = m - warmup; i < m; ++i) out.push_back({compute(K::backward, i, 0)});
    return out;
  }
  const std::vector<std::pair<int, int>> table = interleaved_table(s.scheduled_microbatches(), P, V);
  const int total = int(table.size());
  auto fwd = [&](int k) { return compute(K::forward, table[size_t(k)].first, table[size_t(k)].second); };
  auto bwd = [&](int k) { return compute(K::backward, table[size_t(k)].first, V - 1 - table[size_t(k)].second); };
  if (s.forward_only) {
    for (int k = 0; k < total; ++k) out.push_back({fwd(k)});
    return out;
  }
  const int warmup = std::min(total, (P - r - 1) * 2 + (V - 1) * P);
  for (int k = 0; k < warmup; ++k) out.push_back({fwd(k)});
  for (int k = 0; k < total - warmup; ++k) out.push_back({fwd(warmup + k), bwd(k)});
  for (int k = total - warmup; k < total; ++k) out.push_back({bwd(k)});
  return out;
}

}  // namespace

std::vector<PipeAction> pipeline_compute_order(const PipelineSchedule& s, int r) {
  std::vector<PipeAction> out;
  for (const auto& step : compute_steps(s, r)) out.insert(out.end(), step.begin(), step.end());
  return out;
}

namespace {

// One rank's actions: between two compute steps one exchange with what the first produced and the second needs.
std::vector<PipeAction> fused_actions(const PipelineSchedule& s, int r) {
  const int P = s.pp, chunks = s.pp * s.vpp;
  using K = PipeAction::Kind;
  // What compute action a sends after it, and what it receives before it (peers as pipeline ranks).
  auto output_of = [&](const PipeAction& a) {
    PipeTransfer t;
    const int k = a.chunk * P + r;  // model chunk
    if (a.kind == K::forward && k + 1 < chunks) t.peer = (r + 1) % P, t.what = PipeMessage::activation;
    if (a.kind == K::backward && k > 0) t.peer = (r + P - 1) % P, t.what = PipeMessage::gradient;
    t.microbatch = a.microbatch, t.chunk = a.chunk;
    if (!t) t = PipeTransfer{};
    return t;
  };
  auto input_of = [&](const PipeAction& a) {
    PipeTransfer t;
    const int k = a.chunk * P + r;
    if (a.kind == K::forward && k > 0) t.peer = (r + P - 1) % P, t.what = PipeMessage::activation;
    if (a.kind == K::backward && k + 1 < chunks) t.peer = (r + 1) % P, t.what = PipeMessage::gradient;
    t.microbatch = a.microbatch, t.chunk = a.chunk;
    if (!t) t = PipeTransfer{};
    return t;
  };
  const std::vector<std::vector<PipeAction>> steps = compute_steps(s, r);
  std::vector<PipeAction> out;
  std::vector<PipeTransfer> pending;  // outputs of the last step, not sent yet
  auto flush = [&](const std::vector<PipeAction>* next) {
    PipeAction x;
    x.kind = K::exchange;
    for (const PipeTransfer& t : pending) x.sends.push_back(t);
    if (next)
      for (const PipeAction& a : *next)
        if (PipeTransfer t = input_of(a)) x.recvs.push_back(t);
    // Activations before gradients in both lists: two messages to one peer (pp = 2) match in this order.
    auto by_kind = [](const PipeTransfer& a, const PipeTransfer& b) { return a.what < b.what; };
    std::stable_sort(x.sends.begin(), x.sends.end(), by_kind);
    std::stable_sort(x.recvs.begin(), x.recvs.end(), by_kind);
    if (!x.sends.empty() || !x.recvs.empty()) out.push_back(std::move(x));
    pending.clear();
  };
  for (const auto& step : steps) {
    flush(&step);
    for (const PipeAction& a : step) {
      out.push_back(a);
      if (PipeTransfer t = output_of(a)) pending.push_back(t);
    }
  }
  flush(nullptr);
  return out;
}

// A message across ranks: (activation or gradient, micro-batch, the model chunk that produced it).
std::tuple<int, int, int> message_of(const PipeTransfer& t, bool send, int rank, int P) {
  const int k = t.chunk * P + rank;
  const bool act = t.what == PipeMessage::activation;
  return {act ? 0 : 1, t.microbatch, send ? k : (act ? k - 1 : k + 1)};
}

// The exchange of `rank` (an index into its actions) that holds the other half of message m with `peer`.
int exchange_holding(const std::vector<PipeAction>& actions, int rank, int peer, bool send,
                     const std::tuple<int, int, int>& m, int P) {
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipeAction& a = actions[i];
    if (a.kind != PipeAction::Kind::exchange) continue;
    for (const PipeTransfer& t : send ? a.sends : a.recvs)
      if (t.peer == peer && message_of(t, send, rank, P) == m) return int(i);
  }
  return -1;
}

}  // namespace

// NCCL runs an exchange as one group, and a group that sends to a peer and receives from it waits until the peer's
// group holds both opposite halves. Where the peer's halves lie in two of its exchanges (the last stage receives
// an activation alone, then computes, then sends the gradient alone: at the ends of the schedule and with fewer
// micro-batches than stages), the exchange is split: its sends first, then its receives. MPI's buffered small
// sends hide such a mismatch; pipeline_simulation.h checks for it.
std::vector<PipeAction> pipeline_actions(const PipelineSchedule& s, int r) {
  const int P = s.pp;
  std::vector<std::vector<PipeAction>> all;
  for (int q = 0; q < P; ++q) all.push_back(fused_actions(s, q));
  for (bool changed = true; changed;) {
    changed = false;
    for (int q = 0; q < P && !changed; ++q) {
      std::vector<PipeAction>& acts = all[size_t(q)];
      for (size_t i = 0; i < acts.size() && !changed; ++i) {
        const PipeAction& a = acts[i];
        if (a.kind != PipeAction::Kind::exchange || a.sends.empty() || a.recvs.empty()) continue;
        bool mirrored = true;
        for (const PipeTransfer& snd : a.sends)
          for (const PipeTransfer& rcv : a.recvs) {
            if (snd.peer != rcv.peer) continue;
            const std::vector<PipeAction>& peer = all[size_t(snd.peer)];
            const int x = exchange_holding(peer, snd.peer, q, false, message_of(snd, true, q, P), P);
            const int y = exchange_holding(peer, snd.peer, q, true, message_of(rcv, false, q, P), P);
            mirrored = mirrored && x >= 0 && x == y;
          }
        if (mirrored) continue;
        PipeAction sends = a, recvs = a;
        sends.recvs.clear();
        recvs.sends.clear();
        acts[i] = std::move(sends);
        acts.insert(acts.begin() + int64_t(i) + 1, std::move(recvs));
        changed = true;
      }
    }
  }
  return all[size_t(r)];
}

std::string describe(const PipeAction& a) {
  auto ref = [](const PipeTransfer& t) {
    return cat(t.what == PipeMessage::activation ? "act " : "grad ", t.microbatch, ".", t.chunk);
  };
  switch (a.kind) {
    case PipeAction::Kind::forward: return cat("F", a.microbatch, ".", a.chunk);
    case PipeAction::Kind::backward: return cat("B", a.microbatch, ".", a.chunk);
    case PipeAction::Kind::exchange: {
      std::string s;
      for (const PipeTransfer& t : a.sends) s += cat(s.empty() ? "" : " + ", "send ", ref(t), " to ", t.peer);
      for (const PipeTransfer& t : a.recvs) s += cat(s.empty() ? "" : " + ", "recv ", ref(t), " from ", t.peer);
      return s;
    }
  }
  return "?";
}

}  // namespace hone
