// What the GRPO loop needs on every rank of a pipeline, sent from the last stage (where the LM head, the logprobs
// and the loss live) over the pipeline group, explicitly and in one message each: the logprob pass's per-token
// logprobs of every micro-batch (T floats each), and the training loss's metrics of every micro-batch (a few
// numbers each). Nothing else the loop reads differs between stages. Host Comm (MpiComm).
#pragma once

#include <vector>

#include "comm/comm.h"
#include "rl/policy_loss.h"

namespace hone::rl {

// root's lp[i] (sizes[i] floats each) on every rank of pp; lp is resized elsewhere.
void broadcast_logprobs(Comm& pp, std::vector<std::vector<float>>& lp, const std::vector<int>& sizes, int root);
// root's metrics on every rank of pp (metrics must have the same size everywhere).
void broadcast_loss_metrics(Comm& pp, std::vector<PolicyLossMetrics>& metrics, int root);

}  // namespace hone::rl
