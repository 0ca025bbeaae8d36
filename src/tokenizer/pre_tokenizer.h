// The pre-tokenizer of a Hugging Face tokenizer.json: cuts normalized text into pieces that BPE encodes
// independently. Supported: Split (Regex or String pattern; behaviours Isolated, Removed, MergedWithPrevious,
// MergedWithNext, Contiguous; invert), ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern), Sequence.
// Regexes are compiled with PCRE2 (UTF, UCP; JIT where available), whose Unicode semantics match the
// Oniguruma regexes of `tokenizers` for these patterns.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hone::tok {

class Regex;

class PreTokenizer {
 public:
  explicit PreTokenizer(const nlohmann::json& spec);  // spec may be null (the whole text is one piece)
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of text to out. Pieces view text or strings kept in arena (prefix spaces).
  void split(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena) const;

 private:
  enum class Behavior { Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous };
  struct Step {
    std::shared_ptr<Regex> regex;  // null: no splitting in this step
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  void add_steps(const nlohmann::json& spec);
  static void apply(const Step& step, std::string_view piece, std::vector<std::string_view>& out,
                    std::deque<std::string>& arena);

  std::vector<Step> steps_;
};

}  // namespace hone::tok
