// Choosing the prompt source and reward from the [data] options (see data_setup.h).
#include "data/data_setup.h"

#include "runtime/error.h"

namespace hone::rl {

DataSetup make_data(const DataOptions& options, TokenCounter count_tokens) {
  const bool task = !options.synthetic.task.empty();
  const bool file = !options.dataset.path.empty();
  HONE_USER_CHECK(task != file, task ? "data.path and data.task are both set: choose a JSONL file or a synthetic task"
                                     : "[data] needs data.path (a JSONL file of prompts) or data.task (arithmetic, "
                                       "countdown, sort, reverse)");
  DataSetup s;
  if (task) {
    std::shared_ptr<const SyntheticTask> t = make_synthetic_task(options.synthetic);
    s.source = std::make_unique<SyntheticPromptSource>(t);
    s.reward = t;
  } else {
    s.source = std::make_unique<JsonlPromptDataset>(options.dataset, std::move(count_tokens));
    s.reward = std::make_shared<MathReward>(options.math);
  }
  return s;
}

}  // namespace hone::rl
