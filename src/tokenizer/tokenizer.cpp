// The Tokenizer interface's shared parts: load_tokenizer() and encode_batch().
#include "tokenizer/tokenizer.h"

#include "runtime/error.h"
#include "tokenizer/char_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"

namespace hone {

std::vector<std::vector<TokenId>> Tokenizer::encode_batch(const std::vector<std::string>& texts, bool add_special) const {
  std::vector<std::vector<TokenId>> out(texts.size());
  const auto n = static_cast<std::ptrdiff_t>(texts.size());
#pragma omp parallel for schedule(dynamic, 8) if (n >= 64)
  for (std::ptrdiff_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = encode(texts[static_cast<size_t>(i)], add_special);
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& dir) {
  if (kind == "hf") return std::make_unique<tok::HfTokenizer>(dir);
  if (kind == "chars") return std::make_unique<tok::CharTokenizer>();
  throw UserError(cat("unknown tokenizer kind '", kind, "' (allowed: hf, chars)"));
}

}  // namespace hone
