// The progress line of long phases (runtime/progress.h): in a log, one plain line per interval and never two
// within one, the first after one interval; on a terminal one line rewritten in place after a short delay and
// erased at the phase's end; nothing when off. A generation slowed down on purpose (a progress hook that sleeps
// after every decode step of the CPU generator) proves the interval on the real clock; `hone run` shows progress
// from rank 0 alone, and the logprob and training phases count their micro-batches.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/paths.h"
#include "generation/generator.h"
#include "runtime/progress.h"
#include "test_grpo_util.h"
#include "unit/test_generator_util.h"

using namespace hone;

namespace {

struct Capture {
  std::vector<std::string> writes;
  ProgressLine::Sink sink() {
    return [this](const std::string& s) { writes.push_back(s); };
  }
};

std::vector<std::string> lines_of(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.find(prefix) != std::string::npos) out.push_back(l);
  return out;
}

// The counts of the progress lines of `phase` ("training", "logprob") in a run's output: done and total per line,
// in order, with the step each belongs to.
struct Count {
  int step;
  int64_t done, total;
};
std::vector<Count> counts_of(const std::string& out, const std::string& phase) {
  std::vector<Count> c;
  const std::regex line("progress: step ([0-9]+) " + phase + ": ([0-9]+)/([0-9]+) micro-batches, ");
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) c.push_back({std::stoi(m[1]), std::stoll(m[2]), std::stoll(m[3])});
  }
  return c;
}

// Within one phase the count only grows, never past the phase's total, and the total stays the same.
void check_counts(const std::vector<Count>& c) {
  for (size_t i = 0; i < c.size(); ++i) {
    BOOST_TEST(c[i].done <= c[i].total);
    if (i > 0 && c[i].step == c[i - 1].step) {
      BOOST_TEST(c[i].done >= c[i - 1].done);
      BOOST_TEST(c[i].total == c[i - 1].total);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(progress_line)

BOOST_AUTO_TEST_CASE(log_lines_come_once_per_interval) {
  double now = 100;
  Capture cap;
  ProgressOptions o;
  o.every_s = 30;
  ProgressLine p(o, cap.sink(), [&] { return now; });
  p.begin("step 3 generation", "sequences");
  for (int i = 0; i <= 100; ++i) {  // a pass every second for 100 s
    now = 100 + i;
    p.update(i, 200, 10 * i);
  }
  p.end();
  // At 30, 60 and 90 s into the phase; nothing at the start.
  BOOST_REQUIRE_EQUAL(cap.writes.size(), 3u);
  BOOST_TEST(cap.writes[0] == "progress: step 3 generation: 30/200 sequences, 300 tokens, 10 tokens/s, 30 s elapsed, ~2m50s left\n");
  BOOST_TEST(cap.writes[1].find("60/200 sequences") != std::string::npos);
  BOOST_TEST(cap.writes[2].find("90/200 sequences, 900 tokens, 10 tokens/s, 1m30s elapsed, ~1m50s left") != std::string::npos);
  // A new phase starts its own interval, and passes at uneven times never give two lines within one interval.
  p.begin("step 4 logprob", "micro-batches");  // at 200 s
  std::vector<double> shown;
  for (double t : {10.0, 29.0, 31.0, 32.0, 60.0, 62.0, 91.0, 92.5}) {
    now = 200 + t;
    const size_t before = cap.writes.size();
    p.update(1, 2, 0);
    if (cap.writes.size() > before) shown.push_back(t);
  }
  BOOST_TEST((shown == std::vector<double>{31.0, 62.0, 92.5}));
  now = 400;
  p.begin("step 5 training", "optimizer steps");
  now += 29.9;
  p.update(0, 1, 0);
  BOOST_TEST(cap.writes.size() == 6u);
  now += 0.2;
  p.update(0, 1, 0);
  BOOST_REQUIRE_EQUAL(cap.writes.size(), 7u);
  BOOST_TEST(cap.writes[6] == "progress: step 5 training: 0/1 optimizer steps, 30 s elapsed\n");
}

BOOST_AUTO_TEST_CASE(terminal_line_is_rewritten_in_place_and_erased) {
  double now = 0;
  Capture cap;
  ProgressOptions o;
  o.every_s = 30;
  o.terminal = true;
  o.terminal_after_s = 2;
  o.terminal_refresh_s = 0.5;
  ProgressLine p(o, cap.sink(), [&] { return now; });
  p.begin("step 1 generation", "sequences");
  for (int i = 0; i <= 40; ++i) {  // a pass every 0.1 s for 4 s
    now = 0.1 * i;
    p.update(i, 40, i);
  }
  // From 2 s on, at most every 0.5 s: 2.0, 2.5, 3.0, 3.5, 4.0 (within the clock's rounding: 4 or 5 writes).
  BOOST_TEST(cap.writes.size() >= 4u);
  BOOST_TEST(cap.writes.size() <= 5u);
  for (const std::string& w : cap.writes) {
    BOOST_TEST(w.front() == '\r');
    BOOST_TEST(w.find('\n') == std::string::npos);
    BOOST_TEST(w.substr(w.size() - 3) == "\033[K");
  }
  const size_t n = cap.writes.size();
  p.end();
  BOOST_REQUIRE_EQUAL(cap.writes.size(), n + 1);
  BOOST_TEST(cap.writes.back() == "\r\033[K");
  p.end();  // nothing on screen: nothing to erase
  BOOST_TEST(cap.writes.size() == n + 1);
  // A short phase never shows.
  p.begin("step 2 generation", "sequences");
  now += 1.5;
  p.update(1, 2, 1);
  p.end();
  BOOST_TEST(cap.writes.size() == n + 1);
}

BOOST_AUTO_TEST_CASE(off_at_zero) {
  double now = 0;
  Capture cap;
  ProgressOptions o;
  o.every_s = 0;
  ProgressLine p(o, cap.sink(), [&] { return now; });
  BOOST_TEST(!p.enabled());
  p.begin("step 1 generation", "sequences");
  for (int i = 0; i < 100; ++i) {
    now += 10;
    p.update(i, 100, i);
  }
  p.end();
  BOOST_TEST(cap.writes.empty());
}

// A CPU generation slowed to ~4 ms per decode step (the hook sleeps), 60 tokens per sequence, lines every 0.05 s
// of the real clock: several lines, each at least an interval after the previous one (and after the start).
// A phase with one long unit (one optimizer step): the heartbeat shows the line at its times with the last counts,
// though update() is not called again; end() stops it.
BOOST_AUTO_TEST_CASE(heartbeat_shows_a_phase_that_updates_rarely) {
  ProgressOptions o;
  o.every_s = 0.02;
  std::mutex m;
  std::vector<std::string> text;
  ProgressLine p(o, [&](const std::string& s) {
    std::lock_guard<std::mutex> lock(m);
    text.push_back(s);
  });
  p.begin("step 3 training", "micro-batches");
  p.heartbeat();
  p.update(0, 1, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  p.end();
  const size_t n = text.size();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  BOOST_TEST(text.size() == n);  // nothing after end()
  BOOST_TEST_REQUIRE(n >= 2u);
  BOOST_TEST(n <= 8u);
  for (const std::string& s : text) BOOST_TEST(s.rfind("progress: step 3 training: 0/1 micro-batches, ", 0) == 0, s);
}

BOOST_AUTO_TEST_CASE(slowed_generation_prints_one_line_per_interval) {
  using Clock = std::chrono::steady_clock;
  const test::TinyModel m = test::tiny_model(test::TinyKind::qwen3_tied, 5);
  auto gen = make_cpu_generator(m.config, m.weights);
  std::vector<double> at;  // seconds since the start of each line
  std::vector<std::string> text;
  Clock::time_point t0;
  ProgressOptions o;
  o.every_s = 0.05;
  ProgressLine p(o, [&](const std::string& s) {
    at.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    text.push_back(s);
  });
  int passes = 0;
  gen->set_progress([&](const GenerationProgress& g) {
    ++passes;
    BOOST_TEST(g.total == 8);
    BOOST_TEST(g.finished <= g.total);
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
    p.update(g.finished, g.total, g.generated_tokens);
  });
  std::vector<GenerationRequest> req;
  for (int i = 0; i < 8; ++i) req.push_back({{3, 4, 5, int32_t(6 + i)}, i});
  StopCriteria stop;
  stop.max_new_tokens = 60;
  SamplingParams sp;
  t0 = Clock::now();
  p.begin("step 1 generation", "sequences");
  gen->generate(req, sp, stop, 1, 1, 100);
  p.end();
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  BOOST_TEST_MESSAGE("slowed generation: " << passes << " passes in " << total << " s, " << at.size() << " lines");
  BOOST_TEST(passes == 60);  // one after the first tokens, one per decode step
  BOOST_REQUIRE_GE(at.size(), 3u);
  BOOST_TEST(at.size() <= size_t(total / 0.05) + 1);
  BOOST_TEST(at[0] >= 0.05);
  for (size_t i = 1; i < at.size(); ++i) BOOST_TEST(at[i] - at[i - 1] >= 0.05, "line " << i << " at " << at[i]);
  for (const std::string& s : text) {
    BOOST_TEST(s.rfind("progress: step 1 generation: ", 0) == 0, s);
    BOOST_TEST(s.find("/8 sequences, ") != std::string::npos, s);
    BOOST_TEST(s.back() == '\n');
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(progress_run)

// `hone run` shows progress in a log only when a phase outlasts the interval: none at the default 30 s for a tiny
// run, none at 0, and under two ranks only rank 0's lines (mpirun --tag-output names the rank of every line).
BOOST_AUTO_TEST_CASE(run_shows_progress_from_rank_zero_only) {
  using namespace test_grpo;
  const std::string dir = test::temp_dir("progress-run");
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.max_steps=2", &out), 0);
  BOOST_TEST(lines_of(out, "progress:").empty(), out);
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.max_steps=2 output.overwrite=true checkpoint.overwrite=true run.progress_every_s=0", &out), 0);
  BOOST_TEST(lines_of(out, "progress:").empty(), out);

  // A 1 ms interval: a generation of 100 tokens per sequence outlasts it (about 30 ms on one core).
  const std::string mpi = "timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root --tag-output ";
  const int rc = hone_run(deck,
                          "run.max_steps=2 output.overwrite=true checkpoint.overwrite=true run.progress_every_s=0.001 generation.max_new_tokens=100 "
                          "generation.ignore_eos=true generation.max_total_sequence_length=128 "
                          "train.max_tokens_per_microbatch=128",
                          &out, mpi);
  BOOST_TEST_INFO(out.substr(out.size() > 3000 ? out.size() - 3000 : 0));
  BOOST_REQUIRE_EQUAL(rc, 0);
  const auto lines = lines_of(out, "progress: ");
  BOOST_TEST(!lines.empty());
  for (const std::string& l : lines) {
    BOOST_TEST(l.find(",0]<stdout>:") != std::string::npos, l);  // [jobid,rank]<stdout>: rank 0's
    BOOST_TEST((l.find("generation on rank 0: ") != std::string::npos ||
                l.find("training on rank 0: ") != std::string::npos ||
                l.find("logprob on rank 0: ") != std::string::npos),
               l);
  }
}

// The default of one optimizer step per GRPO step: the training phase shows how many of its micro-batches are done,
// so its count moves within the phase (before, its one unit was the optimizer step: 0/1 until the phase ended).
BOOST_AUTO_TEST_CASE(one_optimizer_step_shows_training_progress_per_micro_batch) {
  using namespace test_grpo;
  const std::string dir = test::temp_dir("progress-training");
  std::string out;
  // Sequences of 100 tokens in micro-batches of one: 16 micro-batches per step, each a millisecond or more, against
  // a 1 ms interval.
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir),
                               "run.max_steps=2 run.progress_every_s=0.001 generation.max_new_tokens=100 "
                               "generation.ignore_eos=true generation.max_total_sequence_length=128 "
                               "train.max_tokens_per_microbatch=128",
                               &out),
                      0);
  const std::vector<Count> c = counts_of(out, "training");
  BOOST_TEST_REQUIRE(!c.empty(), out);
  check_counts(c);
  for (const Count& x : c) BOOST_TEST(x.total == 16);  // 4 prompts x 4 rollouts, one micro-batch each
  const bool moved = std::any_of(c.begin(), c.end(), [](const Count& x) { return x.done > 0 && x.done < x.total; });
  BOOST_TEST(moved, out);
  BOOST_TEST(lines_of(out, "optimizer steps").empty(), out);
}

// The logprob phase counts micro-batches over its two passes (the previous policy's, then the reference's).
BOOST_AUTO_TEST_CASE(logprob_phase_counts_micro_batches_over_both_passes) {
  using namespace test_grpo;
  const std::string dir = test::temp_dir("progress-logprob");
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir),
                               "run.max_steps=2 run.progress_every_s=0.001 generation.max_new_tokens=100 "
                               "generation.ignore_eos=true generation.max_total_sequence_length=128 "
                               "train.max_tokens_per_microbatch=128 loss.kl_coef=0.01 "
                               "loss.skip_prev_logprobs_on_policy=false",
                               &out),
                      0);
  const std::vector<Count> c = counts_of(out, "logprob");
  BOOST_TEST_REQUIRE(!c.empty(), out);
  check_counts(c);
  for (const Count& x : c) BOOST_TEST(x.total == 32);  // 16 micro-batches, two passes
  const bool moved = std::any_of(c.begin(), c.end(), [](const Count& x) { return x.done > 0 && x.done < x.total; });
  BOOST_TEST(moved, out);
}

BOOST_AUTO_TEST_SUITE_END()
