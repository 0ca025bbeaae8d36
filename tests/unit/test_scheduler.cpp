// Continuous batching: admission, prefix-sharing forks, decode ordering and preemption by recompute. The stress
// test drives the scheduler with a simulated KV pool (each slot holds a tag naming the token it should hold), so a
// wrong block table, a missed copy-on-write or a write into a shared block shows up as a wrong tag.
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "generation/kv_block_manager.h"
#include "generation/scheduler.h"
#include "runtime/error.h"

using hone::KvBlockManager;
using hone::Scheduler;
using Kind = Scheduler::Step::Kind;

namespace {

struct Request {
  int64_t group = 0;
  int prompt_len = 0;
  int target = 0;  // tokens the sequence generates before it stops
};

// The token a slot should hold: prompt tokens are the same for the whole group, generated ones are per sequence.
int64_t tag(const Request& r, int64_t seq, int pos) {
  return pos < r.prompt_len ? (r.group + 1) * 1000000 + pos : -((seq + 1) * 1000000 + pos);
}

struct Sim {
  KvBlockManager kv;
  Scheduler sched;
  std::vector<Request> reqs;
  std::vector<int64_t> pool;
  std::vector<int> finished_count;
  int64_t steps = 0, prefills = 0, decodes = 0, forks = 0;

  Sim(int num_blocks, int block_size, hone::SchedulerOptions o, std::vector<Request> r)
      : kv(num_blocks, block_size), sched(kv, o), reqs(std::move(r)),
        pool(size_t(num_blocks) * size_t(block_size), 0), finished_count(reqs.size(), 0) {
    for (size_t i = 0; i < reqs.size(); ++i) sched.add(int64_t(i), reqs[i].group, reqs[i].prompt_len);
  }

  int64_t& slot(int64_t seq, int pos) {
    const auto& t = kv.block_table(seq);
    BOOST_REQUIRE(pos < int(t.size()) * kv.block_size());
    return pool[size_t(t[size_t(pos / kv.block_size())]) * size_t(kv.block_size()) + size_t(pos % kv.block_size())];
  }
  // A decode never writes into a shared block (the prefill of a group's leader fills the blocks its forks share).
  void write(int64_t seq, int pos, bool decode) {
    const auto& t = kv.block_table(seq);
    BOOST_REQUIRE(pos < int(t.size()) * kv.block_size());
    if (decode) BOOST_REQUIRE(kv.ref_count(t[size_t(pos / kv.block_size())]) == 1);
    slot(seq, pos) = tag(reqs[size_t(seq)], seq, pos);
  }
  // What decode attention reads: every cached token of the sequence.
  void verify(int64_t seq, int n) {
    for (int p = 0; p < n; ++p)
      if (slot(seq, p) != tag(reqs[size_t(seq)], seq, p)) {
        BOOST_ERROR("sequence " << seq << " position " << p << " holds " << slot(seq, p));
        return;
      }
  }
  void sampled(int64_t seq) {
    sched.on_token(seq);
    if (sched.generated(seq) == reqs[size_t(seq)].target) {
      ++finished_count[size_t(seq)];
      sched.finish(seq);
    }
  }

  void run() {
    while (!sched.finished()) {
      BOOST_REQUIRE(++steps < 200000);
      Scheduler::Step s = sched.schedule();
      if (s.kind == Kind::prefill) {
        ++prefills;
        BOOST_REQUIRE(!s.prefill.empty());
        BOOST_TEST(s.decode.empty());
        for (const auto& e : s.prefill) {
          const int n = sched.prompt_len(e.seq) + sched.generated(e.seq);
          BOOST_TEST(kv.capacity(e.seq) >= n + 1);  // room for the first decode
          if (e.compute_from < 0) {
            BOOST_TEST(e.tokens == n);
            for (int p = 0; p < n; ++p) write(e.seq, p, false);
          } else {
            ++forks;
            BOOST_TEST(sched.generated(e.seq) == 0);
            BOOST_TEST(s.prefill[size_t(e.compute_from)].compute_from == -1);
            BOOST_TEST(sched.group(s.prefill[size_t(e.compute_from)].seq) == sched.group(e.seq));
          }
        }
        for (const auto& [src, dst] : s.copies)
          for (int o = 0; o < kv.block_size(); ++o)
            pool[size_t(dst) * size_t(kv.block_size()) + size_t(o)] =
                pool[size_t(src) * size_t(kv.block_size()) + size_t(o)];
        for (const auto& e : s.prefill) verify(e.seq, sched.prompt_len(e.seq) + sched.generated(e.seq));
        for (const auto& e : s.prefill) sampled(e.seq);
      } else {
        BOOST_REQUIRE(s.kind == Kind::decode);
        ++decodes;
        BOOST_REQUIRE(!s.decode.empty());
        std::set<int64_t> seen;
        std::set<int64_t> groups_done;
        for (size_t i = 0; i < s.decode.size(); ++i) {
          const int64_t seq = s.decode[i];
          BOOST_TEST(seen.insert(seq).second);
          BOOST_TEST(sched.is_running(seq));
          const int64_t g = sched.group(seq);
          if (i > 0 && sched.group(s.decode[i - 1]) != g) BOOST_TEST(groups_done.insert(sched.group(s.decode[i - 1])).second);
          BOOST_TEST(groups_done.count(g) == 0u);  // a group's rows are consecutive
        }
        for (int64_t seq : s.preempted) BOOST_TEST(seen.count(seq) == 0u);
        for (int64_t seq : s.decode) {
          const int pos = sched.prompt_len(seq) + sched.generated(seq) - 1;
          write(seq, pos, true);
          verify(seq, pos + 1);
        }
        for (int64_t seq : s.decode) sampled(seq);
      }
      BOOST_TEST(sched.num_running() <= 8);
    }
  }
};

std::vector<Request> random_requests(std::mt19937& rng, int groups, int max_prompt, int max_target) {
  std::vector<Request> r;
  for (int g = 0; g < groups; ++g) {
    const int G = std::uniform_int_distribution<int>(1, 4)(rng);
    const int P = std::uniform_int_distribution<int>(1, max_prompt)(rng);
    for (int i = 0; i < G; ++i) r.push_back({g, P, std::uniform_int_distribution<int>(1, max_target)(rng)});
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scheduler)

BOOST_AUTO_TEST_CASE(group_prefilled_once_then_decoded_together) {
  KvBlockManager kv(64, 4);
  Scheduler s(kv, {8, 1000, true});
  for (int i = 0; i < 3; ++i) s.add(i, 7, 10);
  s.add(3, 8, 5);
  Scheduler::Step a = s.schedule();
  BOOST_TEST(int(a.kind) == int(Kind::prefill));
  BOOST_REQUIRE(a.prefill.size() == 4u);
  BOOST_TEST(a.prefill[0].compute_from == -1);
  BOOST_TEST(a.prefill[0].tokens == 10);
  BOOST_TEST(a.prefill[1].compute_from == 0);
  BOOST_TEST(a.prefill[2].compute_from == 0);
  BOOST_TEST(a.prefill[3].compute_from == -1);
  BOOST_TEST(a.copies.size() == 2u);  // the partial third block of each fork
  BOOST_TEST(kv.common_prefix_blocks(0, 2) == 2);
  for (int i = 0; i < 4; ++i) s.on_token(i);
  Scheduler::Step b = s.schedule();
  BOOST_TEST(int(b.kind) == int(Kind::decode));
  BOOST_TEST(b.decode == (std::vector<int64_t>{0, 1, 2, 3}));
  BOOST_TEST(b.preempted.empty());
}

BOOST_AUTO_TEST_CASE(prefill_token_budget_and_max_num_seqs) {
  KvBlockManager kv(256, 4);
  Scheduler s(kv, {3, 25, true});
  for (int i = 0; i < 5; ++i) s.add(i, i, 10);
  Scheduler::Step a = s.schedule();
  BOOST_TEST(a.prefill.size() == 2u);  // 10 + 10 <= 25 < 30
  Scheduler::Step b = s.schedule();
  BOOST_TEST(b.prefill.size() == 1u);  // max_num_seqs = 3
  BOOST_TEST(s.num_running() == 3);
  BOOST_TEST(s.num_waiting() == 2);
}

BOOST_AUTO_TEST_CASE(preempts_the_most_recent_and_requeues_it_first) {
  KvBlockManager kv(6, 4);
  Scheduler s(kv, {8, 1000, true});
  s.add(0, 0, 7);  // 2 blocks (room for token 8)
  s.add(1, 1, 7);
  s.add(2, 2, 3);  // 1 block
  Scheduler::Step a = s.schedule();
  BOOST_TEST(a.prefill.size() == 3u);
  BOOST_TEST(kv.num_free() == 1);
  for (int i = 0; i < 3; ++i) s.on_token(i);
  Scheduler::Step b = s.schedule();  // 0, 1 fit (8 tokens); 2 needs 4 tokens: fits in its block
  BOOST_TEST(b.preempted.empty());
  for (int i = 0; i < 3; ++i) s.on_token(i);
  Scheduler::Step c = s.schedule();  // 0 and 1 need a block each, one is free: preempt 2 (most recent)
  BOOST_TEST(int(c.kind) == int(Kind::decode));
  BOOST_TEST(c.preempted == (std::vector<int64_t>{2}));
  BOOST_TEST(c.decode == (std::vector<int64_t>{0, 1}));
  BOOST_TEST(s.preemptions() == 1);
  BOOST_TEST(s.generated(2) == 2);
  BOOST_TEST(s.num_waiting() == 1);
}

BOOST_AUTO_TEST_CASE(stress_tiny_cache_every_request_finishes_once) {
  int64_t total_preemptions = 0, total_forks = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    const bool share = seed % 3 != 0;
    const int bs = seed % 2 ? 4 : 1;
    std::vector<Request> reqs = random_requests(rng, 24, 20, 30);
    const int num_blocks = (20 + 30 + bs - 1) / bs + 2 + int(seed % 4);  // barely one longest sequence
    Sim sim(num_blocks, bs, {8, 48, share}, reqs);
    sim.run();
    for (size_t i = 0; i < reqs.size(); ++i) {
      BOOST_TEST(sim.finished_count[i] == 1);
      BOOST_TEST(sim.sched.generated(int64_t(i)) == reqs[i].target);
    }
    BOOST_TEST(sim.kv.num_free() == num_blocks);
    sim.kv.check_consistency();
    total_preemptions += sim.sched.preemptions();
    total_forks += sim.forks;
  }
  BOOST_TEST_MESSAGE("preemptions " << total_preemptions << ", forks " << total_forks);
  BOOST_TEST(total_preemptions > 100);
  BOOST_TEST(total_forks > 10);
}

BOOST_AUTO_TEST_CASE(refuses_a_cache_too_small_for_one_sequence) {
  KvBlockManager kv(2, 4);
  Scheduler s(kv, {8, 1000, true});
  s.add(0, 0, 12);  // needs 4 blocks for its prompt and first token
  BOOST_CHECK_THROW(s.schedule(), hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
