// Final answer extraction (see math_answer_extract.h). Hand-written scanners rather than regular expressions: linear
// time and no recursion on untrusted text of any length.
#include "reward/math_answer_extract.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "reward/math_answer_normalize.h"

namespace hone::reward {

const char* answer_source_name(AnswerSource s) {
  switch (s) {
    case AnswerSource::boxed: return "boxed";
    case AnswerSource::hashes: return "hashes";
    case AnswerSource::phrase: return "phrase";
    case AnswerSource::last_number: return "last_number";
    default: return "none";
  }
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Matching braces of a whole text, found in one pass (a stack), so that looking up every \boxed{ of an adversarial
// text stays linear. Escaped braces \{ \} are text, not grouping.
class BraceMatcher {
 public:
  explicit BraceMatcher(const std::string& s) {
    std::vector<size_t> stack;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}')) {
        ++i;
        continue;
      }
      if (s[i] == '{') {
        stack.push_back(opens_.size());
        opens_.push_back(i);
        closes_.push_back(std::string::npos);
      } else if (s[i] == '}' && !stack.empty()) {
        closes_[stack.back()] = i;
        stack.pop_back();
      }
    }
  }
  // Position of the '}' matching the '{' at open, or npos.
  size_t match(size_t open) const {
    auto it = std::lower_bound(opens_.begin(), opens_.end(), open);
    if (it == opens_.end() || *it != open) return std::string::npos;
    return closes_[static_cast<size_t>(it - opens_.begin())];
  }

 private:
  std::vector<size_t> opens_, closes_;
};

// Last case-insensitive occurrence of a lowercase needle.
// Last case-insensitive occurrence of a lowercase needle that starts before `before` and, when line_start is set,
// has only spaces and markdown marks (* # >) between it and the start of its line.
size_t rfind_nocase(const std::string& s, const char* needle, bool line_start = false) {
  const size_t n = std::strlen(needle);
  if (s.size() < n) return std::string::npos;
  for (size_t i = s.size() - n + 1; i-- > 0;) {
    size_t k = 0;
    while (k < n && lower(s[i + k]) == needle[k]) ++k;
    if (k != n) continue;
    if (!line_start) return i;
    size_t j = i;
    while (j > 0 && (s[j - 1] == ' ' || s[j - 1] == '\t' || s[j - 1] == '*' || s[j - 1] == '#' || s[j - 1] == '>')) --j;
    if (j == 0 || s[j - 1] == '\n') return i;
  }
  return std::string::npos;
}

std::string rest_of_line(const std::string& s, size_t from) {
  size_t end = s.find('\n', from);
  return s.substr(from, (end == std::string::npos ? s.size() : end) - from);
}

ExtractedAnswer extract_hashes(const std::string& text) {
  size_t pos = text.rfind("####");
  if (pos == std::string::npos) return {};
  size_t from = pos + 4;
  while (from < text.size() && text[from] == '#') ++from;
  std::string a = trim(rest_of_line(text, from));
  if (a.empty()) return {};
  return {AnswerSource::hashes, a};
}

ExtractedAnswer extract_phrase(const std::string& text) {
  // "answer:" alone is common inside reasoning ("let me check my answer: 3*4 = 12"): only at the start of a line.
  struct Phrase {
    const char* text;
    bool line_start;
  };
  static const Phrase kPhrases[] = {{"the answer is", false}, {"final answer is", false}, {"final answer:", false},
                                    {"answer is:", true},     {"answer:", true}};
  size_t best = std::string::npos, best_end = 0;
  for (const auto& [p, line_start] : kPhrases) {
    size_t at = rfind_nocase(text, p, line_start);
    if (at == std::string::npos) continue;
    // Prefer the occurrence that starts last; at equal starts the longer phrase.
    if (best == std::string::npos || at > best || (at == best && at + std::strlen(p) > best_end)) {
      best = at;
      best_end = at + std::strlen(p);
    }
  }
  if (best == std::string::npos) return {};
  std::string a = rest_of_line(text, best_end);
  size_t b = 0;
  while (b < a.size() && (is_space(a[b]) || a[b] == ':' || a[b] == '*')) ++b;  // "**Final Answer:** 42"
  a = a.substr(b);
  // End of the first sentence: a period followed by a space ("12. I hope it is correct."); "3.5" is not one.
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] == '.' && is_space(a[i + 1])) {
      a = a.substr(0, i);
      break;
    }
  }
  a = trim(a);
  while (!a.empty() && (a.back() == '.' || a.back() == '*')) a.pop_back();
  if (a.empty()) return {};
  return {AnswerSource::phrase, a};
}

ExtractedAnswer extract_last_number(const std::string& text) {
  size_t i = text.size();
  while (i > 0 && !is_digit(text[i - 1])) --i;
  if (i == 0) return {};
  size_t end = i, begin = i;
  auto number_char = [&](size_t k) {
    char c = text[k];
    if (is_digit(c)) return true;
    // A separator counts only between digits: "1,234", "3.5", "3/4".
    return (c == ',' || c == '.' || c == '/') && k > 0 && k + 1 < text.size() && is_digit(text[k - 1]) &&
           is_digit(text[k + 1]);
  };
  while (true) {
    if (begin > 0 && number_char(begin - 1)) {
      --begin;
    } else if (begin >= 3 && text.compare(begin - 2, 2, "\\,") == 0 && is_digit(text[begin - 3])) {
      begin -= 2;  // thin space as thousands separator: 1\,234
    } else if (begin >= 4 && text.compare(begin - 3, 3, "{,}") == 0 && is_digit(text[begin - 4])) {
      begin -= 3;  // 1{,}234
    } else {
      break;
    }
  }
  if (begin > 0 && text[begin - 1] == '.' && (begin == 1 || !is_digit(text[begin - 2]))) --begin;  // ".5"
  if (begin > 0 && text[begin - 1] == '-' && (begin == 1 || (!is_alpha(text[begin - 2]) && !is_digit(text[begin - 2]))))
    --begin;
  return {AnswerSource::last_number, text.substr(begin, end - begin)};
}

}  // namespace

ExtractedAnswer extract_boxed(const std::string& text) {
  ExtractedAnswer best;
  if (text.find("\\boxed") == std::string::npos && text.find("\\fbox") == std::string::npos) return best;
  const BraceMatcher braces(text);
  size_t i = 0;
  while (i < text.size()) {
    size_t at = text.find('\\', i);
    if (at == std::string::npos) break;
    size_t cmd_end;
    if (text.compare(at, 6, "\\boxed") == 0)
      cmd_end = at + 6;
    else if (text.compare(at, 5, "\\fbox") == 0)
      cmd_end = at + 5;
    else {
      i = at + 1;
      continue;
    }
    if (cmd_end < text.size() && is_alpha(text[cmd_end])) {  // \boxedx is another command
      i = cmd_end;
      continue;
    }
    size_t k = cmd_end;
    while (k < text.size() && (text[k] == ' ' || text[k] == '\t')) ++k;
    if (k < text.size() && text[k] == '{') {
      size_t close = braces.match(k);
      if (close == std::string::npos) {  // unbalanced: not an answer; keep looking after it
        i = k + 1;
        continue;
      }
      best = {AnswerSource::boxed, trim(text.substr(k + 1, close - k - 1))};
      i = close + 1;  // a \boxed nested inside this one is part of this answer
    } else if (k > cmd_end && k < text.size()) {
      // "\boxed 5": the next token up to a space or '$'.
      size_t e = k;
      while (e < text.size() && !is_space(text[e]) && text[e] != '$') ++e;
      if (e > k) best = {AnswerSource::boxed, text.substr(k, e - k)};
      i = e;
    } else {
      i = k;
    }
  }
  if (best.found() && best.text.empty()) return {};
  return best;
}

ExtractedAnswer extract_final_answer(const std::string& completion, bool fallback_last_number) {
  ExtractedAnswer a = extract_boxed(completion);
  if (a.found()) return a;
  a = extract_hashes(completion);
  if (a.found()) return a;
  a = extract_phrase(completion);
  if (a.found()) return a;
  if (!fallback_last_number) return {};
  // A short completion that is nothing but a number ("$\dfrac{1}{2}$", "-3.5") is its own answer.
  if (completion.size() <= 200 && completion.find("\\boxed") == std::string::npos &&
      completion.find("\\fbox") == std::string::npos) {
    NormalizedAnswer whole = normalize_answer(completion);
    if (whole.is_number) return {AnswerSource::last_number, trim(completion)};
  }
  return extract_last_number(completion);
  return {};
}

}  // namespace hone::reward
