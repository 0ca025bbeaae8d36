// Pipeline schedules without a model: the layers' split into chunks; every rank's action list of 1F1B, interleaved
// 1F1B and the forward-only pass, simulated over all ranks (no deadlock, each send met by the receive the peer
// expects in order, every forward before its backward, inputs before compute); the bubble against the formula; the
// activations alive on a rank; and the simulation catching a broken list.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "parallel/pipeline_layout.h"
#include "parallel/pipeline_simulation.h"
#include "runtime/error.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(pipeline_schedule)

BOOST_AUTO_TEST_CASE(layers_split_evenly_interleaved_or_as_listed) {
  const PipelineLayout even = PipelineLayout::of(8, 4);
  BOOST_TEST(even.layers_of(2) == (std::vector<int>{4, 5}));
  BOOST_TEST(even.holds_embedding(0));
  BOOST_TEST(!even.holds_embedding(1));
  BOOST_TEST(even.holds_head(3));
  BOOST_TEST(even.rank_of_layer(7) == 3);

  const PipelineLayout inter = PipelineLayout::of(8, 2, 2);  // chunks 0..3 of 2 layers, on ranks 0,1,0,1
  BOOST_TEST(inter.model_chunk(1, 1) == 3);
  BOOST_TEST(inter.layer_begin(3) == 6);
  BOOST_TEST(inter.layers_of(0) == (std::vector<int>{0, 1, 4, 5}));
  BOOST_TEST(inter.layers_of(1) == (std::vector<int>{2, 3, 6, 7}));
  BOOST_TEST(inter.rank_of_layer(5) == 0);

  const PipelineLayout uneven = PipelineLayout::of(8, 2, 1, {3, 5});
  BOOST_TEST(uneven.layers_of(0) == (std::vector<int>{0, 1, 2}));
  BOOST_TEST(uneven.layer_end(1) == 8);

  BOOST_CHECK_THROW(PipelineLayout::of(6, 4), UserError);             // 4 does not divide 6
  BOOST_CHECK_THROW(PipelineLayout::of(8, 2, 1, {3, 4}), UserError);  // sums to 7
  BOOST_CHECK_THROW(PipelineLayout::of(8, 2, 1, {8}), UserError);     // one entry per chunk
  BOOST_CHECK_THROW(PipelineLayout::of(8, 1, 2), UserError);          // vpp without pp
}

BOOST_AUTO_TEST_CASE(one_f_one_b_warms_up_then_alternates) {
  const PipelineSchedule s{4, 1, 6, false};
  std::string order;
  for (const PipeAction& a : pipeline_compute_order(s, 1)) order += describe(a) + " ";
  BOOST_TEST(order == "F0.0 F1.0 F2.0 B0.0 F3.0 B1.0 F4.0 B2.0 F5.0 B3.0 B4.0 B5.0 ");
  // The last stage runs forward then backward of each micro-batch; its first exchange receives the activation.
  const std::vector<PipeAction> last = pipeline_actions(s, 3);
  BOOST_TEST(describe(last[0]) == "recv act 0.0 from 2");
  BOOST_TEST(describe(last[1]) == "F0.0");
  BOOST_TEST(describe(last[2]) == "B0.0");
  BOOST_TEST(describe(last[3]) == "send grad 0.0 to 2 + recv act 1.0 from 2");
}

BOOST_AUTO_TEST_CASE(every_schedule_completes_on_all_ranks) {
  int checked = 0;
  for (bool forward_only : {false, true})
    for (int pp = 1; pp <= 6; ++pp)
      for (int vpp = 1; vpp <= (pp > 1 ? 4 : 1); ++vpp)
        for (int m = 0; m <= 13; ++m) {
          const PipelineSchedule s{pp, vpp, m, forward_only};
          const PipelineSimulation r = simulate_pipeline(s, 1.0, forward_only ? 0.0 : 2.0);
          BOOST_TEST_INFO(s.name() << ", pp " << pp << ", m " << m);
          BOOST_TEST(r.completed, r.problem);
          ++checked;
        }
  BOOST_TEST(checked == 2 * (14 + 5 * 4 * 14));
}

BOOST_AUTO_TEST_CASE(bubble_matches_the_formula) {
  for (int pp = 2; pp <= 6; ++pp)
    for (int m = 1; m <= 13; ++m) {
      for (bool forward_only : {false, true}) {
        const PipelineSchedule s{pp, 1, m, forward_only};
        const PipelineSimulation r = simulate_pipeline(s, 1.0, forward_only ? 0.0 : 2.0);
        BOOST_TEST_INFO(s.name() << ", pp " << pp << ", m " << m);
        BOOST_TEST(std::abs(r.bubble_fraction() - double(pp - 1) / (m + pp - 1)) < 1e-12);
      }
      for (int vpp = 2; vpp <= 4; ++vpp) {
        const PipelineSchedule s{pp, vpp, m, false};
        const double sim = simulate_pipeline(s).bubble_fraction();
        const double plain = simulate_pipeline(PipelineSchedule{pp, 1, m, false}).bubble_fraction();
        BOOST_TEST_INFO(s.name() << ", pp " << pp << ", m " << m);
        if (m % pp == 0) BOOST_TEST(std::abs(sim - s.bubble_formula()) < 1e-12);  // (pp-1) / (vpp m + pp - 1)
        BOOST_TEST(sim <= plain + 1e-12);  // interleaving never idles more than 1F1B
      }
    }
  // pp = 4, m = 8: 1F1B idles 3/11 of the time, two virtual chunks 3/19.
  BOOST_TEST(std::abs(simulate_pipeline({4, 1, 8, false}).bubble_fraction() - 3.0 / 11) < 1e-12);
  BOOST_TEST(std::abs(simulate_pipeline({4, 2, 8, false}).bubble_fraction() - 3.0 / 19) < 1e-12);
}

// 1F1B keeps at most pp - r micro-batches' activations on rank r (a forward not yet backwarded).
BOOST_AUTO_TEST_CASE(one_f_one_b_bounds_the_activations_alive) {
  const int pp = 4, m = 10;
  for (int r = 0; r < pp; ++r) {
    int alive = 0, most = 0;
    for (const PipeAction& a : pipeline_compute_order({pp, 1, m, false}, r)) {
      alive += a.kind == PipeAction::Kind::forward ? 1 : -1;
      most = std::max(most, alive);
    }
    BOOST_TEST(most == pp - r);
  }
}

// Interleaving with m not a multiple of pp runs the next multiple with empty micro-batches.
BOOST_AUTO_TEST_CASE(interleaving_rounds_the_micro_batches_up) {
  BOOST_TEST((PipelineSchedule{4, 2, 5, false}.scheduled_microbatches()) == 8);
  BOOST_TEST((PipelineSchedule{4, 2, 8, false}.scheduled_microbatches()) == 8);
  BOOST_TEST((PipelineSchedule{4, 1, 5, false}.scheduled_microbatches()) == 5);
  BOOST_TEST((PipelineSchedule{4, 2, 5, true}.scheduled_microbatches()) == 5);
  std::set<int> mbs;
  for (const PipeAction& a : pipeline_compute_order({4, 2, 5, false}, 0)) mbs.insert(a.microbatch);
  BOOST_TEST(mbs.size() == 8u);
}

// One micro-batch at pp = 2: the last stage receives the activation alone and sends the gradient alone, so the first
// stage must not send and receive in one exchange (one NCCL group waits for both halves: the run hung on two
// GPUs); the simulation refuses that fusion.
BOOST_AUTO_TEST_CASE(a_group_with_one_peer_is_mirrored_by_the_peer) {
  const PipelineSchedule s{2, 1, 1, false};
  std::vector<std::vector<PipeAction>> actions;
  std::vector<std::string> text(2);
  for (int r = 0; r < 2; ++r) {
    actions.push_back(pipeline_actions(s, r));
    for (const PipeAction& a : actions.back()) text[size_t(r)] += "[" + describe(a) + "] ";
  }
  BOOST_TEST(text[0] == "[F0.0] [send act 0.0 to 1] [recv grad 0.0 from 1] [B0.0] ");
  BOOST_TEST(text[1] == "[recv act 0.0 from 0] [F0.0] [B0.0] [send grad 0.0 to 0] ");
  BOOST_TEST(simulate_actions(s, actions).completed);
  auto fused = actions;
  fused[0][1].recvs = fused[0][2].recvs;
  fused[0].erase(fused[0].begin() + 2);
  const PipelineSimulation r = simulate_actions(s, fused);
  BOOST_TEST(!r.completed);
  BOOST_TEST(r.problem.find("one NCCL group against two") != std::string::npos, r.problem);
}

BOOST_AUTO_TEST_CASE(the_simulation_catches_a_broken_schedule) {
  const PipelineSchedule s{3, 1, 4, false};
  std::vector<std::vector<PipeAction>> actions;
  for (int r = 0; r < 3; ++r) actions.push_back(pipeline_actions(s, r));
  BOOST_TEST(simulate_actions(s, actions).completed);

  // Rank 1 forgets to send micro-batch 0's activations: rank 2 takes micro-batch 1's for them.
  auto lost = actions;
  for (PipeAction& a : lost[1])
    if (a.kind == PipeAction::Kind::exchange && !a.sends.empty() && a.sends[0].what == PipeMessage::activation) {
      a.sends.clear();
      break;
    }
  PipelineSimulation r = simulate_actions(s, lost);
  BOOST_TEST(!r.completed);
  BOOST_TEST(r.problem.find("expects the act of micro-batch 0") != std::string::npos, r.problem);

  // Rank 0 first waits for a gradient that needs its own activations: every rank waits.
  auto early = actions;
  PipeAction wait;
  wait.kind = PipeAction::Kind::exchange;
  wait.recvs.push_back({1, PipeMessage::gradient, 0, 0});
  early[0].insert(early[0].begin(), wait);
  r = simulate_actions(s, early);
  BOOST_TEST(!r.completed);
  BOOST_TEST(r.problem.find("deadlock") != std::string::npos, r.problem);

  // Rank 0 sends micro-batches 1 and 0 in swapped order: rank 1 receives the wrong one first.
  auto swapped = actions;
  std::vector<PipeAction*> sends;
  for (PipeAction& a : swapped[0])
    if (a.kind == PipeAction::Kind::exchange && !a.sends.empty() && a.sends[0].what == PipeMessage::activation)
      sends.push_back(&a);
  BOOST_REQUIRE(sends.size() >= 2u);
  std::swap(sends[0]->sends[0].microbatch, sends[1]->sends[0].microbatch);
  r = simulate_actions(s, swapped);
  BOOST_TEST(!r.completed);
  BOOST_TEST(!r.problem.empty());
}

BOOST_AUTO_TEST_SUITE_END()
