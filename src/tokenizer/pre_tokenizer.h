// The pre-tokenizer of a Hugging Face tokenizer.json: cuts normalized text into pieces that BPE encodes
// independently. Supported: Split (Regex or String pattern; behaviours Isolated, Removed, MergedWithPrevious,
// MergedWithNext, Contiguous; invert), ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern), Digits
// (individual_digits), Metaspace (replacement, prepend_scheme always/first/never, split), Sequence.
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

  // Appends the pieces of text to out. Pieces view text or strings kept in arena (prefix spaces, Metaspace).
  // at_start: text begins the input (Metaspace prepend_scheme "first" prepends only there).
  void split(std::string_view text, std::vector<std::string_view>& out, std::deque<std::string>& arena,
             bool at_start = true) const;

  // A ByteLevel step is present: BPE works on bytes in the GPT-2 byte alphabet.
  bool byte_level() const { return byte_level_; }

 private:
  enum class Behavior { Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous };
  enum class Prepend { Always, First, Never };
  struct Step {
    bool metaspace = false;  // replace ' ' with replacement, maybe prepend it, then split before it (split)
    std::string replacement;
    Prepend prepend = Prepend::Always;
    std::shared_ptr<Regex> regex;  // null: no splitting in this step
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  void add_steps(const nlohmann::json& spec);
  static void apply(const Step& step, std::string_view piece, bool at_start, std::vector<std::string_view>& out,
                    std::deque<std::string>& arena);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace hone::tok
