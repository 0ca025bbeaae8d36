// The [data] options turned into a prompt source and its reward.
#include <boost/test/unit_test.hpp>

#include "common/paths.h"
#include "data/data_setup.h"
#include "runtime/error.h"

using namespace hone::rl;

BOOST_AUTO_TEST_SUITE(data_setup)

BOOST_AUTO_TEST_CASE(chooses_a_file_or_a_task) {
  DataOptions o;
  o.synthetic.task = "";
  BOOST_CHECK_THROW(make_data(o), hone::UserError);
  o.dataset.path = test::source_dir() + "/tests/data/rl/prompts.jsonl";
  DataSetup file = make_data(o);
  BOOST_TEST(file.source->epoch_size() == 4);
  BOOST_TEST(file.reward->name() == "math");
  Prompt p = file.source->next_batch(1)[0];
  BOOST_TEST(file.reward->score(p, "\\boxed{" + hone::rl::ground_truth_answer(p.answer) + "}").correct);
  o.synthetic.task = "reverse";
  BOOST_CHECK_THROW(make_data(o), hone::UserError);
  o.dataset.path = "";
  DataSetup task = make_data(o);
  BOOST_TEST(task.reward->name() == "reverse");
  p = task.source->next_batch(1)[0];
  BOOST_TEST(task.reward->score(p, p.answer).reward == 1.0);
}

BOOST_AUTO_TEST_SUITE_END()
