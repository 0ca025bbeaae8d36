// Choosing the prompt source and checker from the [data] options (see task.h).
#include "task/task.h"

#include "runtime/error.h"

namespace hone::task {

Task make_task(const TaskOptions& options, data::TokenCounter count_tokens) {
  const bool synthetic = !options.synthetic.task.empty();
  const bool file = !options.dataset.path.empty();
  HONE_USER_CHECK(synthetic != file,
                  synthetic ? "data.path and data.task are both set: choose a JSONL file or a synthetic task"
                            : "[data] needs data.path (a JSONL file of prompts) or data.task (arithmetic, "
                              "countdown, sort, reverse)");
  Task t;
  if (synthetic) {
    std::shared_ptr<const data::SyntheticTask> s = data::make_synthetic_task(options.synthetic);
    t.prompts = std::make_unique<data::SyntheticPromptSource>(s);
    t.checker = s;
  } else {
    t.prompts = std::make_unique<data::JsonlPromptDataset>(options.dataset, std::move(count_tokens));
    t.checker = std::make_shared<reward::MathReward>(options.math);
  }
  return t;
}

}  // namespace hone::task
