// The expert-parallel group's vote before each generation pass (expert_lockstep.h).
#include "parallel/expert_lockstep.h"

#include "comm/host_collectives.h"

namespace hone {

bool ExpertLockstep::vote(bool working) { return all_reduce_max_value(ep_, int64_t(working ? 1 : 0)) > 0; }

}  // namespace hone
