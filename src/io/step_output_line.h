// The per-step line hone prints to stdout, like a thermo line: a header once at the start, then one row per step
// with the time of every phase, the mean reward, the KL and the token rates. Values a step lacks print as "-".
//
//     step     gen_s  reward_s logprob_s   train_s   refit_s   total_s    reward        kl gen_tok/s trn_tok/s
//        1     1.234     0.010     0.200     0.812     0.020     2.276    0.4375 1.234e-03    2120.5    8410.0
#pragma once

#include <string>

namespace hone {

class StepRow;

std::string step_line_header();
std::string format_step_line(const StepRow& row);

}  // namespace hone
