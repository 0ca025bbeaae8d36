// Leftmost-longest matching of added tokens with a byte trie.
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace hone::tok {

namespace {

// The word characters of the `single_word` check: letters, digits and '_' (Unicode-aware for letters/digits
// would need a property table; ASCII and any non-ASCII byte count as word characters here).
bool is_word_byte(unsigned char c) {
  return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

}  // namespace

int32_t AddedTokenMatcher::child(int32_t node, unsigned char b) const {
  const auto& ch = nodes_[static_cast<size_t>(node)].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), b, [](const auto& e, unsigned char v) { return e.first < v; });
  return (it != ch.end() && it->first == b) ? it->second : -1;
}

void AddedTokenMatcher::add(const AddedToken& token) {
  if (token.content.empty()) return;
  int32_t node = 0;
  for (char c : token.content) {
    const auto b = static_cast<unsigned char>(c);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& ch = nodes_[static_cast<size_t>(node)].children;
      ch.insert(std::upper_bound(ch.begin(), ch.end(), b, [](unsigned char v, const auto& e) { return v < e.first; }),
                {b, next});
    }
    node = next;
  }
  first_bytes_.set(static_cast<unsigned char>(token.content[0]));
  nodes_[static_cast<size_t>(node)].token = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t* end) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (nodes_[static_cast<size_t>(node)].token >= 0) {
      best = nodes_[static_cast<size_t>(node)].token;
      *end = i + 1;
    }
  }
  return best;
}

std::vector<TextPiece> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextPiece> out;
  size_t run_begin = 0;  // start of the ordinary text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_bytes_.test(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    size_t end = 0;
    const int32_t t = longest_at(text, pos, &end);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[static_cast<size_t>(t)];
    if (tok.single_word) {
      const bool left_ok = pos == 0 || !is_word_byte(static_cast<unsigned char>(text[pos - 1]));
      const bool right_ok = end == text.size() || !is_word_byte(static_cast<unsigned char>(text[end]));
      if (!left_ok || !right_ok) {
        ++pos;
        continue;
      }
    }
    size_t begin = pos;
    if (tok.lstrip) {
      while (begin > run_begin) {
        size_t b = begin - 1;
        while (b > run_begin && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        size_t j = b;
        if (!py_isspace(utf8_next(text, j))) break;
        begin = b;
      }
    }
    if (tok.rstrip) {
      while (end < text.size()) {
        size_t j = end;
        if (!py_isspace(utf8_next(text, j))) break;
        end = j;
      }
    }
    if (begin > run_begin) out.push_back({run_begin, begin, -1});
    out.push_back({begin, end, tok.id});
    run_begin = pos = end;
  }
  if (run_begin < text.size()) out.push_back({run_begin, text.size(), -1});
  return out;
}

}  // namespace hone::tok
