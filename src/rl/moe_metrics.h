// The step metrics of a mixture of experts (doc/output.md): the load-balancing loss, each sparse layer's load
// imbalance and the routing difference between generation and training, from the engines' MoeStepStats reduced
// over the data-parallel ranks.
#pragma once

#include <string>
#include <vector>

#include "comm/comm.h"
#include "io/step_output.h"
#include "model/model_config.h"
#include "rl/grpo_batch.h"
#include "roles/role_stats.h"

namespace hone::rl {

struct MetricDeclaration {
  std::string name, unit, description;
};
// The metrics of c (none for a dense model): moe/aux_loss, moe/routing_mismatch, moe/load_imbalance/max and
// moe/load_imbalance/layer_<l> for each sparse layer l.
std::vector<MetricDeclaration> moe_metric_declarations(const ModelConfig& c);

// Collective over dp (every rank calls it, with its own stats): sets the metrics of moe_metric_declarations.
//   moe/load_imbalance/layer_<l>  max over experts / mean over experts of the tokens routed to each in layer l's
//                                 training passes, summed over the ranks (1 = perfectly even)
//   moe/aux_loss                  the load-balancing loss of the training micro-batches, their mean
//   moe/routing_mismatch          of the (token, sparse layer) pairs of the training passes that generation routed,
//                                 the fraction whose set of k experts differs from generation's
//   moe/token_mult_prob_error_unreplayed   under loss.router_replay, token_mult_prob_error of training forwards
//                                 that route by themselves (the replayed ones' is token_mult_prob_error)
void set_moe_metrics(StepRow& row, const MoeStepStats& stats, const ModelConfig& c, Comm& dp);

// Adds one training forward's routing to st (both engines): counts [S x E], the counted rows each expert of each of
// the S sparse layers got; its load-balancing loss; mine [T x S x k], each row's experts in the layout of
// MicroBatch::gen_routing (empty: not recorded), compared with generation's where mb carries them.
void add_moe_routing(MoeStepStats& st, int S, int E, int k, const std::vector<int64_t>& counts, double aux_loss,
                     const std::vector<int32_t>& mine, const MicroBatch& mb);

}  // namespace hone::rl
