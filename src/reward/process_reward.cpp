// The external-process reward (see process_reward.h).
#include "reward/process_reward.h"

#include "reward/reward_protocol.h"
#include "runtime/child_process.h"
#include "runtime/error.h"
#include "runtime/one_line.h"

namespace hone::reward {

namespace {

std::string shown(const std::string& line, size_t max = 200) {
  return one_line(line.size() > max ? line.substr(0, max) + "..." : line);
}

}  // namespace

ProcessReward::ProcessReward(const std::string& command, double timeout_s, int rank,
                             const std::vector<std::pair<std::string, std::string>>& env)
    : command_(command), timeout_s_(timeout_s), rank_(rank) {
  HONE_USER_CHECK(!command.empty(), "reward.command is empty");
  HONE_USER_CHECK(timeout_s > 0, "reward.timeout_s must be > 0, got ", timeout_s);
  std::vector<std::pair<std::string, std::string>> e = {{"HONE_RANK", std::to_string(rank)},
                                                        {"PYTHONUNBUFFERED", "1"}};
  e.insert(e.end(), env.begin(), env.end());
  child_ = std::make_unique<ChildProcess>(command, e);
}

ProcessReward::~ProcessReward() = default;

std::string ProcessReward::name() const { return cat("reward.command `", command_, "`"); }

void ProcessReward::fail(const std::string& what, bool with_exit) {
  std::string msg = cat(name(), " on rank ", rank_, ": ", what);
  if (with_exit) msg += cat("; the process ", child_->exit_description());
  child_->kill();
  const std::string tail = child_->stderr_tail();
  msg += tail.empty() ? std::string("; it wrote nothing to stderr") : cat("; the end of its stderr:\n", tail);
  throw UserError(msg);
}

void ProcessReward::probe(double wait_s) {
  const ChildProcess::Exchange x = child_->exchange("", 1, wait_s);
  switch (x.status) {
    case ChildProcess::Status::timeout: return;  // running and waiting for requests, as it should
    case ChildProcess::Status::closed:
      fail(cat("it closed its stdout within ", wait_s, " s of its start, before any request"), true);
    case ChildProcess::Status::ok:
      fail(cat("it wrote a line nobody asked for before any request: '", shown(x.lines.front()),
               "' (one reply line per request line; print anything else to stderr)"),
           false);
    case ChildProcess::Status::line_too_long:
      fail("it wrote a line nobody asked for before any request (past 16 MiB without a newline)", false);
  }
}

std::vector<RewardResult> ProcessReward::score(const std::vector<RewardQuery>& batch) {
  ++batches_;
  if (batch.empty()) return {};
  const int64_t step = batch.front().step;
  if (child_->pending_output())
    fail(cat("it wrote a line nobody asked for before batch ", batches_, " (step ", step, "): '",
             child_->pending_line(), "' (one reply line per request line; print anything else to stderr)"),
         false);
  std::string requests;
  for (size_t i = 0; i < batch.size(); ++i) requests += reward_request_line(batch[i], i, batch.size());
  const ChildProcess::Exchange x = child_->exchange(requests, batch.size(), timeout_s_);
  const std::string progress = cat(x.lines.size(), " of ", batch.size(), " replies of step ", step, "'s batch ",
                                   batches_, " received");
  switch (x.status) {
    case ChildProcess::Status::ok: break;
    case ChildProcess::Status::timeout:
      fail(cat("no complete answer within reward.timeout_s = ", timeout_s_, " s (", progress, ")"), false);
    case ChildProcess::Status::closed:
      fail(cat("it closed its stdout (", progress, ")"), true);
    case ChildProcess::Status::line_too_long:
      fail(cat("a reply line grew past 16 MiB without a newline (", progress, ")"), false);
  }
  if (child_->pending_output())
    fail(cat("it wrote more reply lines than the ", batch.size(), " requests of step ", step, "'s batch ", batches_,
             ": '", child_->pending_line(), "' (one reply line per request line; print anything else to stderr)"),
         false);
  std::vector<RewardResult> out;
  out.reserve(batch.size());
  for (size_t i = 0; i < x.lines.size(); ++i) {
    try {
      out.push_back(parse_reward_reply(x.lines[i]));
      for (const RewardScore& s : out.back().scores) {
        if (score_names_.count(s.name) || score_names_.size() < kMaxScoreNames) {
          score_names_.insert(s.name);
          continue;
        }
        throw UserError(cat("its sub-score \"", s.name, "\" would be name ", kMaxScoreNames + 1,
                            " of the run; a reward gives at most ", kMaxScoreNames,
                            " distinct sub-score names (each is a dataset of the output file)"));
      }
    } catch (const UserError& e) {
      fail(cat("reply ", i + 1, " of ", batch.size(), " (step ", step, ") is not a reward: '", shown(x.lines[i]),
               "': ", e.what()),
           false);
    }
  }
  return out;
}

}  // namespace hone::reward
