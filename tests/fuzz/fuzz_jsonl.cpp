// Fuzz driver: a JSONL prompt file (io/jsonl.cpp, data/dataset_jsonl.cpp). Input: a first byte choosing the
// options (skip bad lines, an answer key, a length limit), then the file's bytes. Every usable prompt is read.
#include "data/dataset_jsonl.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string dir = fuzz::fresh_dir("jsonl");
  hone::data::DatasetOptions o;
  o.path = dir + "/prompts.jsonl";
  o.skip_bad_lines = mode & 1;
  o.answer_key = (mode & 2) ? "answer" : "";
  o.prompt_key = (mode & 4) ? "messages" : "prompt";
  o.shuffle = mode & 8;
  o.max_prompt_tokens = (mode & 16) ? 40 : 0;
  o.seed = mode;
  fuzz::write_file(o.path, std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  fuzz::expect_user_error_or_success([&] {
    hone::data::JsonlPromptDataset d(o, [](const hone::data::Prompt& p) { return int64_t(p.text.size()); });
    (void)d.describe();
    for (int64_t i = 0; i < d.stats().usable && i < 64; ++i) (void)d.at(i);
    (void)d.next_batch(3);
  });
  return 0;
}
