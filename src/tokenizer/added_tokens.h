// Added and special tokens of a Hugging Face tokenizer, found in text before pre-tokenization.
//
// Matching is leftmost-longest (what the `tokenizers` library's Aho-Corasick does): scanning left to right, the
// first position where some token starts wins, and there the longest token. Flags honoured per token:
// lstrip/rstrip (the match swallows whitespace on that side), single_word (only where no word character touches
// the match), normalized (the token is matched in normalized text instead of raw text; see HfTokenizer).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hone::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// A piece of text: either a run of ordinary text (id < 0) or one added token.
struct TextPiece {
  size_t begin = 0, end = 0;
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  void add(const AddedToken& token);
  bool empty() const { return tokens_.empty(); }
  // Cuts text into ordinary runs and added tokens, in order; empty ordinary runs are left out.
  std::vector<TextPiece> split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                        // index into tokens_ when a token ends here
  };
  int32_t child(int32_t node, unsigned char b) const;
  // Longest token starting at pos: index into tokens_ and its end, or -1.
  int32_t longest_at(std::string_view text, size_t pos, size_t* end) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_{Node{}};
  std::bitset<256> first_bytes_;
};

}  // namespace hone::tok
