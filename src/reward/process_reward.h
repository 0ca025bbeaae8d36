// reward.command: the user's reward as an external process, started once on each rank that scores rollouts and
// spoken to in batches of JSON lines over its stdin and stdout (the protocol: reward/reward_protocol.h). A batch has
// reward.timeout_s seconds. A process that exits, crashes, stops answering, or answers with a line that is not a
// reward ends the run (UserError) with what happened, the offending line, and the last lines of its stderr.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "reward/batch_reward.h"

namespace hone {
class ChildProcess;
}

namespace hone::reward {

class ProcessReward : public BatchReward {
 public:
  // Starts `/bin/sh -c command` with HONE_RANK (world rank) and PYTHONUNBUFFERED=1 in its environment, plus env.
  ProcessReward(const std::string& command, double timeout_s, int rank,
                const std::vector<std::pair<std::string, std::string>>& env = {});
  ~ProcessReward() override;
  std::string name() const override;
  std::vector<RewardResult> score(const std::vector<RewardQuery>& batch) override;
  // hone check's test of the program: for wait_s seconds without a request it must neither end nor write to its
  // stdout (a command that does not exist, a script that fails on its imports); else a UserError as score()'s.
  void probe(double wait_s);

 private:
  [[noreturn]] void fail(const std::string& what, bool with_exit);
  std::string command_;
  double timeout_s_;
  int rank_;
  int64_t batches_ = 0;
  std::set<std::string> score_names_;  // the sub-score names replies have given, at most kMaxScoreNames
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace hone::reward
