// Fuzz driver: a deck's TOML text and command-line overrides (config/deck_loader.cpp, config/toml_guard.cpp).
// Input: the deck text, then NUL-separated overrides (key=value).
#include "config/config.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts = fuzz::split_nul(data, size, 9);
  const std::string text = parts[0];
  parts.erase(parts.begin());
  fuzz::expect_user_error_or_success([&] {
    const hone::Config c = hone::load_config_from_string(text, "deck.toml", parts);
    (void)c.to_toml();
  });
  return 0;
}
