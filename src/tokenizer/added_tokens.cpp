// Leftmost-longest matching of added tokens with a byte trie.
#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

#include "tokenizer/utf8.h"

namespace hone::tok {

namespace {

// The word characters of the `single_word` check, as `tokenizers` (char::is_alphanumeric, or '_'): Unicode
// letters and numbers by general category (Rust's Alphabetic also has a few marks; those count as non-word here).
bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return cp == '_' || (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool word_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t b = pos - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return is_word_char(utf8_next(text, b));
}

bool word_after(std::string_view text, size_t pos) {
  return pos < text.size() && is_word_char(utf8_next(text, pos));
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
      if (word_before(text, pos) || word_after(text, end)) {
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
        if (!unicode_white_space(utf8_next(text, j))) break;
        begin = b;
      }
    }
    if (tok.rstrip) {
      while (end < text.size()) {
        size_t j = end;
        if (!unicode_white_space(utf8_next(text, j))) break;
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
