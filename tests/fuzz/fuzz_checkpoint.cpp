// Fuzz driver: a checkpoint folder's metadata as resume reads it: the COMPLETE marker (io/checkpoint.cpp),
// state.json (rl/checkpoint_state.cpp) and the data cursor in it (data/prompt_source.cpp), and deck.json, the
// record of the deck it was written under, compared with the default deck (rl/resume_deck.cpp). Input: the marker,
// then after a NUL state.json, then after a NUL deck.json. The folder also holds a small model.safetensors the
// marker may list.
#include "data/prompt_source.h"
#include "fuzz/fuzz_common.h"
#include "io/checkpoint.h"
#include "config/config.h"
#include "rl/checkpoint_state.h"
#include "rl/resume_deck.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = fuzz::split_nul(data, size, 3);
  const std::string dir = fuzz::fresh_dir("ck");
  const std::string folder = dir + "/" + hone::checkpoint_folder_name(3);
  std::filesystem::create_directories(folder);
  fuzz::write_file(folder + "/COMPLETE", parts[0]);
  fuzz::write_file(folder + "/model.safetensors", "0123456789");
  fuzz::expect_user_error_or_success([&] {
    (void)hone::verify_checkpoint(folder, true);
    (void)hone::latest_complete_checkpoint(dir);
    if (parts.size() > 1) {
      const hone::rl::CheckpointState st = hone::rl::parse_checkpoint_state(parts[1], folder + "/state.json");
      (void)hone::data::DataCursor::parse(st.data_cursor);
    }
    if (parts.size() > 2) {
      static const hone::Config deck = hone::Config::defaults();
      static const hone::rl::DeckRecord now = hone::rl::record_deck(deck);
      const hone::rl::DeckRecord old = hone::rl::parse_deck_record(parts[2], folder + "/deck.json");
      (void)hone::rl::compare_resume_deck(deck, now, old, folder);
    }
  });
  return 0;
}
