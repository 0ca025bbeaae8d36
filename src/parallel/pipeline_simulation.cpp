// The event simulation of all pipeline ranks' action lists (pipeline_simulation.h).
#include "parallel/pipeline_simulation.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "runtime/error.h"

namespace hone {
namespace {

// A message's identity across ranks: kind, micro-batch and the model chunk that produced it.
using MessageId = std::tuple<int, int, int>;

struct Posted {
  MessageId id;
  double time = 0;
  size_t exchange = 0;  // the posting rank's action index: which of its exchanges holds this half
};

// One direction between a pair of ranks: sends and receives, matched in posting order.
struct Channel {
  std::vector<Posted> sends, recvs;
};

struct Part {
  bool send = false;
  int peer = 0;
  int channel_src = 0, channel_dst = 0;
  size_t index = 0;  // its place in the channel's list
  MessageId id;
};

struct RankState {
  std::vector<PipeAction> actions;
  size_t pc = 0;
  double clock = 0, busy = 0;
  bool posted = false;       // the current exchange's halves are posted
  std::vector<Part> parts;   // of the current exchange
  std::set<MessageId> received;
  std::set<std::pair<int, int>> forwarded, backwarded;  // (micro-batch, chunk) done
};

std::string msg(const MessageId& id) {
  return cat(std::get<0>(id) == 0 ? "act" : "grad", " of micro-batch ", std::get<1>(id), " from model chunk ",
             std::get<2>(id));
}

}  // namespace

PipelineSimulation simulate_pipeline(const PipelineSchedule& s, double forward_time, double backward_time) {
  std::vector<std::vector<PipeAction>> actions;
  for (int r = 0; r < s.pp; ++r) actions.push_back(pipeline_actions(s, r));
  return simulate_actions(s, actions, forward_time, backward_time);
}

PipelineSimulation simulate_actions(const PipelineSchedule& s, const std::vector<std::vector<PipeAction>>& actions,
                                    double forward_time, double backward_time) {
  PipelineSimulation out;
  const int P = s.pp, chunks = s.pp * s.vpp;
  const double tf = forward_time / s.vpp, tb = backward_time / s.vpp;
  HONE_CHECK(int(actions.size()) == P, actions.size(), " action lists for ", P, " pipeline ranks");
  std::vector<RankState> ranks(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) ranks[size_t(r)].actions = actions[size_t(r)];
  std::map<std::pair<int, int>, Channel> channels;

  auto model_chunk = [&](int r, int v) { return v * P + r; };
  // The message a transfer half moves: a send names this rank's output, a receive this rank's input.
  auto id_of = [&](int r, const PipeTransfer& t, bool send) {
    const int k = model_chunk(r, t.chunk);
    const int kind = t.what == PipeMessage::activation ? 0 : 1;
    int from = k;
    if (!send) from = t.what == PipeMessage::activation ? k - 1 : k + 1;
    return MessageId{kind, t.microbatch, from};
  };
  auto fail = [&](std::string why) {
    out.problem = std::move(why);
    return out;
  };

  for (;;) {
    bool progress = false, all_done = true;
    for (int r = 0; r < P; ++r) {
      RankState& st = ranks[size_t(r)];
      while (st.pc < st.actions.size()) {
        const PipeAction& a = st.actions[st.pc];
        if (a.kind != PipeAction::Kind::exchange) {
          const int k = model_chunk(r, a.chunk);
          const std::pair<int, int> key{a.microbatch, a.chunk};
          if (a.kind == PipeAction::Kind::forward) {
            if (k > 0 && !st.received.count(MessageId{0, a.microbatch, k - 1}))
              return fail(cat("rank ", r, ": ", describe(a), " before its input arrived"));
            if (!st.forwarded.insert(key).second) return fail(cat("rank ", r, ": ", describe(a), " twice"));
            const double t = a.microbatch < s.microbatches ? tf : 0.0;  // an empty micro-batch takes no time
            st.clock += t, st.busy += t;
          } else {
            if (!st.forwarded.count(key)) return fail(cat("rank ", r, ": ", describe(a), " before its forward"));
            if (k + 1 < chunks && !st.received.count(MessageId{1, a.microbatch, k + 1}))
              return fail(cat("rank ", r, ": ", describe(a), " before its output's gradient arrived"));
            if (!st.backwarded.insert(key).second) return fail(cat("rank ", r, ": ", describe(a), " twice"));
            const double t = a.microbatch < s.microbatches ? tb : 0.0;
            st.clock += t, st.busy += t;
          }
          ++st.pc;
          progress = true;
          continue;
        }
        if (!st.posted) {
          st.parts.clear();
          std::vector<std::pair<const PipeTransfer*, bool>> halves;
          for (const PipeTransfer& t : a.sends) halves.push_back({&t, true});
          for (const PipeTransfer& t : a.recvs) halves.push_back({&t, false});
          for (const auto& [t, send] : halves) {
            if (t->peer == r || t->peer < 0 || t->peer >= P)
              return fail(cat("rank ", r, ": ", describe(a), " names a bad peer"));
            Part p;
            p.send = send;
            p.peer = t->peer;
            p.channel_src = send ? r : t->peer;
            p.channel_dst = send ? t->peer : r;
            p.id = id_of(r, *t, send);
            if (send) {
              const std::pair<int, int> produced{t->microbatch, t->chunk};
              const bool done = t->what == PipeMessage::activation ? st.forwarded.count(produced) > 0
                                                                     : st.backwarded.count(produced) > 0;
              if (!done) return fail(cat("rank ", r, ": ", describe(a), " sends what it has not computed"));
            }
            Channel& c = channels[{p.channel_src, p.channel_dst}];
            auto& list = send ? c.sends : c.recvs;
            p.index = list.size();
            list.push_back({p.id, st.clock, st.pc});
            st.parts.push_back(p);
          }
          st.posted = true;
          progress = true;
        }
        double done_at = st.clock;
        bool complete = true;
        for (const Part& p : st.parts) {
          const Channel& c = channels[{p.channel_src, p.channel_dst}];
          const auto& other = p.send ? c.recvs : c.sends;
          if (other.size() <= p.index) {
            complete = false;
            continue;
          }
          if (other[p.index].id != p.id)
            return fail(cat("message ", p.index, " from rank ", p.channel_src, " to rank ", p.channel_dst, " is the ",
                            msg(p.send ? p.id : other[p.index].id), " but the receiver expects the ",
                            msg(p.send ? other[p.index].id : p.id)));
          done_at = std::max(done_at, other[p.index].time);
        }
        // NCCL runs a batch of transfers as one group: the halves a rank exchanges with one peer complete only
        // against a group of the peer's that holds exactly their opposite halves (a send and a receive with the
        // same peer in one group wait for each other there, where MPI's buffered sends would let them pass).
        if (complete) {
          for (const Part& p : st.parts) {
            const Channel& c = channels[{p.channel_src, p.channel_dst}];
            const size_t theirs = (p.send ? c.recvs : c.sends)[p.index].exchange;
            size_t ours = 0, mirrored = 0;
            for (const Part& q : st.parts) {
              if (q.peer != p.peer) continue;
              ++ours;
              const Channel& cq = channels[{q.channel_src, q.channel_dst}];
              if ((q.send ? cq.recvs : cq.sends)[q.index].exchange != theirs)
                return fail(cat("rank ", r, ": ", describe(a), " meets two different exchanges of rank ", p.peer,
                                " (one NCCL group against two: they wait for each other)"));
            }
            // The peer's halves with this rank in that exchange: the same number, or it waits for more.
            for (const auto* list : {&channels[{p.peer, r}].sends, &channels[{r, p.peer}].recvs})
              for (const Posted& x : *list) mirrored += x.exchange == theirs ? 1 : 0;
            if (mirrored != ours)
              return fail(cat("rank ", r, ": ", describe(a), " against an exchange of rank ", p.peer, " with ",
                              mirrored, " transfers to it instead of ", ours,
                              " (one NCCL group against two: they wait for each other)"));
          }
        }
        if (!complete) break;
        for (const Part& p : st.parts)
          if (!p.send) st.received.insert(p.id);
        out.messages += int64_t(std::count_if(st.parts.begin(), st.parts.end(), [](const Part& p) { return p.send; }));
        st.clock = done_at;
        st.posted = false;
        ++st.pc;
        progress = true;
      }
      if (st.pc < st.actions.size()) all_done = false;
    }
    if (all_done) break;
    if (!progress) {
      std::string why = "deadlock:";
      for (int r = 0; r < P; ++r) {
        const RankState& st = ranks[size_t(r)];
        if (st.pc < st.actions.size()) why += cat(" rank ", r, " waits in ", describe(st.actions[st.pc]), ";");
      }
      return fail(why);
    }
  }
  for (int r = 0; r < P; ++r) {
    const RankState& st = ranks[size_t(r)];
    const size_t want = size_t(s.scheduled_microbatches()) * size_t(s.vpp);
    if (st.forwarded.size() != want || (!s.forward_only && st.backwarded.size() != want))
      return fail(cat("rank ", r, " ran ", st.forwarded.size(), " forwards and ", st.backwarded.size(),
                      " backwards of ", want));
    out.makespan = std::max(out.makespan, st.clock);
    out.busy = std::max(out.busy, st.busy);
  }
  out.completed = true;
  return out;
}

}  // namespace hone
