// The [data] options turned into a task: its prompt source and its checker.
#include <boost/test/unit_test.hpp>

#include "common/paths.h"
#include "runtime/error.h"
#include "task/task.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(task_setup)

BOOST_AUTO_TEST_CASE(chooses_a_file_or_a_synthetic_task) {
  task::TaskOptions o;
  o.synthetic.task = "";
  BOOST_CHECK_THROW(task::make_task(o), UserError);
  o.dataset.path = test::source_dir() + "/tests/data/rl/prompts.jsonl";
  task::Task file = task::make_task(o);
  BOOST_TEST(file.prompts->epoch_size() == 4);
  BOOST_TEST(file.checker->name() == "math");
  data::Prompt p = file.prompts->next_batch(1)[0];
  BOOST_TEST(file.checker->score(p, "\\boxed{" + reward::ground_truth_answer(p.answer) + "}").correct);
  o.synthetic.task = "reverse";
  BOOST_CHECK_THROW(task::make_task(o), UserError);
  o.dataset.path = "";
  task::Task synthetic = task::make_task(o);
  BOOST_TEST(synthetic.checker->name() == "reverse");
  p = synthetic.prompts->next_batch(1)[0];
  BOOST_TEST(synthetic.checker->score(p, p.answer).reward == 1.0);
}

BOOST_AUTO_TEST_SUITE_END()
