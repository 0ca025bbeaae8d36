// The wire form of the rollout channel (roles/wire.h, roles/rollout_wire.h): every record comes back field for
// field, and a damaged message is an error naming it, never a read past its end.
#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>
#include <vector>

#include "roles/rollout_wire.h"
#include "runtime/error.h"

namespace {

hone::rl::GrpoSample sample() {
  hone::rl::GrpoSample s;
  s.prompt_index = 3;
  s.position = 41;
  s.rollout.prompt = {1, 2, 3};
  s.rollout.completion = {7, 8};
  s.rollout.logprobs = {-0.5f, -1.25f};
  s.rollout.finish_reason = hone::FinishReason::length;
  s.rollout.text = std::string("a\0b", 3) + " \xe2\x82\xac";  // a NUL and UTF-8 travel as bytes
  s.rollout.sample_index = 1234567890123;
  s.rollout.routing = {5, 0, 65535, 9};
  s.reward = 0.75;
  s.correct = true;
  s.scores = {{"format", 1.0}, {"length.penalty", -0.125}};
  s.advantage = 2.f;  // computed by the trainer: does not travel
  return s;
}

bool thrown(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const std::exception& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(wire)

BOOST_AUTO_TEST_CASE(a_scored_sample_comes_back_field_for_field) {
  const hone::rl::GrpoSample s = sample();
  const std::vector<hone::rl::GrpoSample> back =
      hone::wire_decode<std::vector<hone::rl::GrpoSample>>(hone::wire_encode(std::vector{s, s}), "a test message");
  BOOST_TEST(back.size() == 2u);
  for (const hone::rl::GrpoSample& b : back) {
    BOOST_TEST(b.position == s.position);
    BOOST_TEST(b.rollout.prompt == s.rollout.prompt);
    BOOST_TEST(b.rollout.completion == s.rollout.completion);
    BOOST_TEST(b.rollout.logprobs == s.rollout.logprobs);
    BOOST_TEST((b.rollout.finish_reason == s.rollout.finish_reason));
    BOOST_TEST(b.rollout.text == s.rollout.text);
    BOOST_TEST(b.rollout.sample_index == s.rollout.sample_index);
    BOOST_TEST(b.rollout.routing == s.rollout.routing);
    BOOST_TEST(b.reward == s.reward);
    BOOST_TEST(b.correct);
    BOOST_TEST(b.scores.size() == 2u);
    BOOST_TEST(b.scores[1].name == "length.penalty");
    BOOST_TEST(b.scores[1].value == -0.125);
    BOOST_TEST(b.advantage == 0.f);  // the trainer's own
  }
}

BOOST_AUTO_TEST_CASE(records_results_and_metrics_come_back) {
  hone::RolloutRecord r;
  r.group = 2, r.prompt_id = 17, r.prompt = "p", r.completion = "c", r.answer = "42", r.reward = 1.5, r.correct = true;
  r.advantage = -0.25, r.trained = false, r.prompt_tokens = 9, r.completion_tokens = 4, r.truncated = true;
  r.logprob_sum = -3.5, r.scores = {{"x", 2.0}};
  const hone::RolloutRecord rb = hone::wire_decode<hone::RolloutRecord>(hone::wire_encode(r), "a record");
  BOOST_TEST(rb.group == 2);
  BOOST_TEST(rb.answer == "42");
  BOOST_TEST(!rb.trained);
  BOOST_TEST(rb.truncated);
  BOOST_TEST(rb.logprob_sum == -3.5);
  BOOST_TEST(rb.scores.size() == 1u);

  hone::reward::RewardResult res;
  res.reward = 0.5, res.correct = false, res.formatted = true, res.extracted = "7", res.scores = {{"s", 3.0}};
  const auto rr = hone::wire_decode<std::vector<hone::reward::RewardResult>>(hone::wire_encode(std::vector{res}), "r");
  BOOST_TEST(rr.size() == 1u);
  BOOST_TEST(rr[0].formatted);
  BOOST_TEST(rr[0].extracted == "7");
  BOOST_TEST(rr[0].scores[0].value == 3.0);

  hone::PolicyLossMetrics m;
  m.loss = 0.1, m.valid_tokens = (int64_t(1) << 60) + 1, m.ratio_min = 0.9, m.entropy_sum = 12.5;
  const hone::PolicyLossMetrics mb = hone::wire_decode<hone::PolicyLossMetrics>(hone::wire_encode(m), "m");
  BOOST_TEST(mb.loss == 0.1);
  BOOST_TEST(mb.valid_tokens == m.valid_tokens);  // exact: counts travel as integers
  BOOST_TEST(mb.ratio_min == 0.9);
  BOOST_TEST(mb.entropy_sum == 12.5);
}

BOOST_AUTO_TEST_CASE(a_damaged_message_is_an_error_naming_it) {
  const std::string bytes = hone::wire_encode(std::vector{sample()});
  // Every truncation ends early, by name; none reads past the end.
  for (size_t n = 0; n < bytes.size(); ++n)
    BOOST_TEST(thrown([&] { hone::wire_decode<std::vector<hone::rl::GrpoSample>>(bytes.substr(0, n), "a rollout"); },
                      "a rollout ends early"),
               "cut at " << n);
  // Bytes past the end, a count far beyond the bytes left, a bool that is neither 0 nor 1.
  BOOST_TEST(thrown([&] { hone::wire_decode<std::vector<hone::rl::GrpoSample>>(bytes + "x", "a rollout"); },
                    "bytes past its end"));
  std::string huge = bytes;
  const uint64_t n = uint64_t(1) << 61;
  huge.replace(0, sizeof n, reinterpret_cast<const char*>(&n), sizeof n);
  BOOST_TEST(thrown([&] { hone::wire_decode<std::vector<hone::rl::GrpoSample>>(huge, "a rollout"); }, "ends early"));
  std::string flag = hone::wire_encode(true);
  flag[0] = 2;
  BOOST_TEST(thrown([&] { hone::wire_decode<bool>(flag, "a flag"); }, "a flag holds a bool of 2"));
}

BOOST_AUTO_TEST_SUITE_END()
