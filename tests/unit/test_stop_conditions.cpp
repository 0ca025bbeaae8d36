// Stop conditions: stop token ids, stop strings found incrementally across token boundaries, max_new_tokens,
// and the precedence between them.
#include <boost/test/unit_test.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "ops/philox.h"
#include "generation/stop_conditions.h"
#include "runtime/error.h"

namespace hone {
std::ostream& operator<<(std::ostream& os, FinishReason r) { return os << finish_reason_name(r); }
}  // namespace hone

namespace {

hone::StopCriteria criteria(std::vector<int32_t> ids, std::vector<std::string> strings, int64_t max_new) {
  hone::StopCriteria c;
  c.stop_token_ids = std::move(ids);
  c.stop_strings = std::move(strings);
  c.max_new_tokens = max_new;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stop_conditions)

BOOST_AUTO_TEST_CASE(stop_token_id_stops_with_reason_stop) {
  const hone::StopCriteria c = criteria({151643, 151645}, {}, 100);
  BOOST_TEST(!hone::check_stop(c, 17, 1, "a", 0).stopped());
  const hone::StopDecision d = hone::check_stop(c, 151645, 2, "a", 1);
  BOOST_TEST(d.stopped());
  BOOST_TEST(d.reason == hone::FinishReason::stop);
  BOOST_TEST(d.stop_token == 151645);
  BOOST_TEST(d.text_end == std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_new_tokens_stops_with_reason_length) {
  const hone::StopCriteria c = criteria({2}, {"###"}, 3);
  BOOST_TEST(!hone::check_stop(c, 5, 2, "ab", 1).stopped());
  const hone::StopDecision d = hone::check_stop(c, 5, 3, "abc", 2);
  BOOST_TEST(d.reason == hone::FinishReason::length);
  BOOST_TEST(d.text_end == std::string::npos);
  // On the last allowed token, a stop token or stop string wins over length.
  BOOST_TEST(hone::check_stop(c, 2, 3, "abc", 2).reason == hone::FinishReason::stop);
  const hone::StopDecision s = hone::check_stop(c, 5, 3, "ab###", 2);
  BOOST_TEST(s.reason == hone::FinishReason::stop);
  BOOST_TEST(s.text_end == 2u);
  BOOST_CHECK_THROW(hone::check_stop(c, 5, 4, "abcd", 3), hone::Error);
}

// A stop string split over several tokens fires on the token that completes it; the text is cut before it.
BOOST_AUTO_TEST_CASE(stop_string_across_tokens_cuts_text_before_it) {
  const hone::StopCriteria c = criteria({}, {"\n\nQuestion:"}, 100);
  const std::vector<std::string> pieces = {"The ans", "wer is", " 42.", "\n", "\nQue", "stion:", " next"};
  std::string text;
  int fired_at = -1;
  hone::StopDecision fired;
  for (size_t i = 0; i < pieces.size() && fired_at < 0; ++i) {
    const size_t prev = text.size();
    text += pieces[i];
    const hone::StopDecision d = hone::check_stop(c, 7, static_cast<int64_t>(i + 1), text, prev);
    if (d.stopped()) fired_at = static_cast<int>(i), fired = d;
  }
  BOOST_TEST(fired_at == 5);
  BOOST_TEST(fired.reason == hone::FinishReason::stop);
  BOOST_TEST(fired.string_match.string_index == 0);
  BOOST_TEST(text.substr(0, fired.text_end) == "The answer is 42.");
}

BOOST_AUTO_TEST_CASE(earliest_match_wins_then_list_order) {
  const std::vector<std::string> stops = {"world", "o w", "hello"};
  hone::StringMatch m = hone::find_stop_string("hello world", stops);
  BOOST_TEST(m.found);
  BOOST_TEST(m.position == 0u);
  BOOST_TEST(m.string_index == 2);
  m = hone::find_stop_string("say: hello world", {"world", "o w"});
  BOOST_TEST(m.position == 9u);
  BOOST_TEST(m.string_index == 1);
  m = hone::find_stop_string("xxabcxx", {"abc", "ab"});
  BOOST_TEST(m.position == 2u);
  BOOST_TEST(m.string_index == 0);
  BOOST_TEST(!hone::find_stop_string("nothing here", {"stop", ""}).found);
  BOOST_TEST(!hone::find_stop_string("", {"a"}).found);
}

// Text already checked is not searched again: a match that ended before new_from is not reported.
BOOST_AUTO_TEST_CASE(only_matches_ending_in_new_text_are_reported) {
  const std::vector<std::string> stops = {"STOP"};
  BOOST_TEST(!hone::find_stop_string("abSTOPxyz", stops, 6).found);
  BOOST_TEST(hone::find_stop_string("abSTOPxyz", stops, 5).found);  // the P is new
  BOOST_TEST(hone::find_stop_string("abSTOPxyz", stops, 5).position == 2u);
  BOOST_TEST(!hone::find_stop_string("abSTOPxyz", stops, 99).found);
}

// Incremental checking over random texts finds the same first stop as a full search of each prefix.
BOOST_AUTO_TEST_CASE(incremental_checks_agree_with_full_search) {
  const std::vector<std::string> stops = {"aba", "bb", "cab"};
  const hone::StopCriteria c = criteria({}, stops, 1000);
  int trials_stopped = 0;
  for (uint32_t trial = 0; trial < 300; ++trial) {
    std::string text;
    bool stopped = false;
    for (uint32_t tok = 0; tok < 40 && !stopped; ++tok) {
      const hone::Uniform4 u = hone::philox_uniform4(11, trial, tok, 0);
      const int len = 1 + static_cast<int>(u.u[0] * 3);
      const size_t prev = text.size();
      for (int k = 0; k < len; ++k) text += static_cast<char>('a' + static_cast<int>(u.u[1 + k] * 3));
      const hone::StopDecision d = hone::check_stop(c, 0, tok + 1, text, prev);
      const hone::StringMatch full = hone::find_stop_string(text, stops, 0);
      // Nothing matched before this token, so a match anywhere in the text must end in the new part.
      BOOST_TEST(d.stopped() == full.found);
      if (d.stopped()) {
        stopped = true;
        ++trials_stopped;
        BOOST_TEST(d.text_end == full.position);
        BOOST_TEST(text.compare(d.text_end, stops[d.string_match.string_index].size(),
                                stops[d.string_match.string_index]) == 0);
      }
    }
  }
  BOOST_TEST(trials_stopped > 250);  // the comparison above ran on real matches
}

BOOST_AUTO_TEST_CASE(finish_reason_names) {
  BOOST_TEST(std::string(hone::finish_reason_name(hone::FinishReason::stop)) == "stop");
  BOOST_TEST(std::string(hone::finish_reason_name(hone::FinishReason::length)) == "length");
  BOOST_TEST(std::string(hone::finish_reason_name(hone::FinishReason::none)) == "none");
}

BOOST_AUTO_TEST_SUITE_END()
