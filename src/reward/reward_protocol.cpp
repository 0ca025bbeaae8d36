// Request lines and reply parsing of reward.command (see reward_protocol.h).
#include "reward/reward_protocol.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/json_nesting.h"
#include "runtime/error.h"
#include "runtime/one_line.h"

namespace hone::reward {

using json = nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* json_type(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  return "an object";
}

double finite_number(const json& v, const std::string& what) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  HONE_USER_CHECK(v.is_number(), what, " must be a number, got ", json_type(v));
  const double x = v.get<double>();
  HONE_USER_CHECK(std::isfinite(x), what, " is not finite (", dump(v), ")");
  return x;
}

// A reward is trained on in fp32 (advantages, the loss): one beyond its range would become infinite there.
double reward_number(const json& v, const std::string& what) {
  const double x = finite_number(v, what);
  HONE_USER_CHECK(std::fabs(x) <= double(std::numeric_limits<float>::max()), what, " is ", dump(v),
                  ", beyond the range of a 32-bit float (3.4e38), in which rewards are trained on");
  return x;
}

}  // namespace

std::string reward_request_line(const RewardQuery& q, size_t batch_index, size_t batch_size) {
  const data::Prompt& p = *q.prompt;
  json messages = json::array();
  for (const auto& m : p.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  if (messages.empty()) messages.push_back({{"role", "user"}, {"content", p.text}});
  // The fields in a fixed order, "extra" spliced in as the dataset's own JSON text (no second parse).
  std::string line = "{\"prompt\":" + dump(p.text);
  line += ",\"messages\":" + dump(messages);
  line += ",\"completion\":" + dump(std::string(q.completion));
  line += ",\"answer\":" + dump(p.answer);
  line += ",\"extra\":" + (p.extra_json.empty() ? std::string("{}") : p.extra_json);
  line += cat(",\"id\":", p.id, ",\"step\":", q.step, ",\"completion_tokens\":", q.completion_tokens);
  line += cat(",\"finish_reason\":\"", q.truncated ? "length" : "stop", "\"");
  line += cat(",\"batch_index\":", batch_index, ",\"batch_size\":", batch_size, "}\n");
  return line;
}

RewardResult parse_reward_reply(const std::string& line) {
  const std::string deep = json_nesting_error(line);
  HONE_USER_CHECK(deep.empty(), "it is ", deep);
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  HONE_USER_CHECK(!j.is_discarded(), "it is not JSON (a reply is a number or an object {\"reward\": x, ...}; "
                                     "print anything else to stderr)");
  RewardResult r;
  if (j.is_number()) {
    r.reward = reward_number(j, "the reward");
    r.correct = r.reward > 0;
    return r;
  }
  HONE_USER_CHECK(j.is_object(), "it is ", json_type(j), ", not a number or an object {\"reward\": x, ...}");
  auto reward = j.find("reward");
  HONE_USER_CHECK(reward != j.end(), "it has no \"reward\" field");
  r.reward = reward_number(*reward, "\"reward\"");
  r.correct = r.reward > 0;  // unless the reply says
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "reward") continue;
    if (key == "correct") {
      HONE_USER_CHECK(it->is_boolean(), "\"correct\" must be true or false, got ", json_type(*it));
      r.correct = it->get<bool>();
      continue;
    }
    HONE_USER_CHECK(valid_score_name(key), "sub-score name \"", one_line(key.substr(0, 80)),
                    "\" is not 1-64 letters, digits, '_', '.' or '-'");
    r.scores.push_back({key, finite_number(*it, "sub-score \"" + key + "\"")});
  }
  return r;
}

}  // namespace hone::reward
