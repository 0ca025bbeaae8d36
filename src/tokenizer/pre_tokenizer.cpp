// Pre-tokenizer steps of tokenizer.json, with PCRE2 regexes.
#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <new>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "tokenizer/utf8.h"

namespace hone::tok {

namespace {

// Oniguruma's \s (the Unicode White_Space property) as class contents. PCRE2's own \s also matches U+180E
// (MONGOLIAN VOWEL SEPARATOR), which `tokenizers` treats as a non-space character.
const char* const kSpaceClass = R"(\t-\r\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";

// Rewrites \s and \S (outside and inside character classes) to the White_Space set above.
std::string onig_spaces(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[i + 1];
      ++i;
      if (n == 's') {
        out += in_class ? std::string(kSpaceClass) : cat("[", kSpaceClass, "]");
      } else if (n == 'S') {
        HONE_USER_CHECK(!in_class, "tokenizer.json: \\S inside a character class is not supported in a pre-tokenizer regex");
        out += cat("[^", kSpaceClass, "]");
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ']' first in a class
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

// A compiled PCRE2 pattern; matching is thread-safe (match data is per call).
class Regex {
 public:
  Regex(const std::string& source, bool literal) {
    const std::string pattern = literal ? source : onig_spaces(source);
    int err = 0;
    PCRE2_SIZE offset = 0;
    const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &err, &offset,
                          nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw UserError(cat("tokenizer.json: cannot compile the pre-tokenizer regex at offset ", offset, ": ",
                          reinterpret_cast<const char*>(msg), " (pattern ", pattern, ")"));
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match of text as [begin, end) pairs; empty matches are skipped.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
    matches.clear();
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    pcre2_match_context* mc = pcre2_match_context_create(nullptr);
    if (!md || !mc) {
      pcre2_match_data_free(md);
      pcre2_match_context_free(mc);
      throw std::bad_alloc();
    }
    // PCRE2's default match limit (10 million steps) stops the GPT-2 style patterns on long runs of one class
    // (10 M spaces: \s*[\r\n]+ backtracks over the whole run once): the limit grows with the text instead, which
    // keeps every match linear in its length while still bounding a pathological pattern.
    pcre2_set_match_limit(mc, static_cast<uint32_t>(std::min<uint64_t>(UINT32_MAX, 10000000 + 100 * uint64_t(text.size()))));
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t start = 0;
    while (start < text.size()) {
      int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), start, 0, md, mc) : PCRE2_ERROR_JIT_STACKLIMIT;
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(code_, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, mc);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mc);
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        throw UserError(cat("the tokenizer's pre-tokenizer regex cannot split a text of ", text.size(),
                            " bytes (PCRE2: ", reinterpret_cast<const char*>(msg), ")"));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] > ov[0]) {
        matches.emplace_back(ov[0], ov[1]);
        start = ov[1];
      } else {  // empty match: step over one character
        start = ov[0] + 1;
        while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
      }
    }
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
  }

 private:
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

namespace {

// The pattern of the ByteLevel pre-tokenizer when use_regex is true (GPT-2).
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

PreTokenizer::PreTokenizer(const nlohmann::json& spec) {
  if (!spec.is_null()) add_steps(spec);
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::add_steps(const nlohmann::json& spec) {
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : spec.at("pretokenizers")) add_steps(s);
  } else if (type == "Split") {
    Step step;
    const auto& pat = spec.at("pattern");
    if (pat.contains("Regex")) {
      step.regex = std::make_shared<Regex>(pat.at("Regex").get<std::string>(), false);
    } else if (pat.contains("String")) {
      step.regex = std::make_shared<Regex>(pat.at("String").get<std::string>(), true);
    } else {
      throw UserError("tokenizer.json: a Split pre-tokenizer needs a Regex or String pattern");
    }
    const std::string b = spec.value("behavior", "Isolated");
    if (b == "Isolated") step.behavior = Behavior::Isolated;
    else if (b == "Removed") step.behavior = Behavior::Removed;
    else if (b == "MergedWithPrevious") step.behavior = Behavior::MergedWithPrevious;
    else if (b == "MergedWithNext") step.behavior = Behavior::MergedWithNext;
    else if (b == "Contiguous") step.behavior = Behavior::Contiguous;
    else throw UserError(cat("tokenizer.json: unsupported Split behavior '", b, "'"));
    step.invert = spec.value("invert", false);
    steps_.push_back(std::move(step));
  } else if (type == "Digits") {
    // Rust's char::is_numeric (Nd, Nl, No) is \p{N}: each digit alone, or runs of digits.
    Step step;
    step.regex = std::make_shared<Regex>(R"(\p{N})", false);
    step.behavior = spec.value("individual_digits", false) ? Behavior::Isolated : Behavior::Contiguous;
    steps_.push_back(std::move(step));
  } else if (type == "Metaspace") {
    Step step;
    step.metaspace = true;
    step.replacement = spec.value("replacement", "\u2581");
    HONE_USER_CHECK(!step.replacement.empty(), "tokenizer.json: Metaspace with an empty replacement");
    size_t n = 0;
    utf8_next(step.replacement, n);
    HONE_USER_CHECK(n == step.replacement.size(), "tokenizer.json: Metaspace replacement '", step.replacement,
                    "' is not one character");
    std::string scheme = spec.value("prepend_scheme", "");
    if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";  // older files
    if (scheme == "always") step.prepend = Prepend::Always;
    else if (scheme == "first") step.prepend = Prepend::First;
    else if (scheme == "never") step.prepend = Prepend::Never;
    else throw UserError(cat("tokenizer.json: unsupported Metaspace prepend_scheme '", scheme, "'"));
    if (spec.value("split", true))
      step.regex = std::make_shared<Regex>(step.replacement, true);
    step.behavior = Behavior::MergedWithNext;
    steps_.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    // The byte mapping itself is implicit: BPE works on raw bytes. Only the splitting matters here.
    byte_level_ = true;
    Step step;
    step.add_prefix_space = spec.value("add_prefix_space", false);
    if (spec.value("use_regex", true)) step.regex = std::make_shared<Regex>(kGpt2Pattern, false);
    if (step.add_prefix_space || step.regex) steps_.push_back(std::move(step));
  } else {
    throw UserError(cat("tokenizer.json: unsupported pre-tokenizer type '", type,
                        "' (supported: Sequence, Split, ByteLevel, Digits, Metaspace)"));
  }
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out,
                         std::deque<std::string>& arena, bool at_start) const {
  if (steps_.empty()) {
    if (!text.empty()) out.push_back(text);
    return;
  }
  std::vector<std::string_view> cur{text}, next;
  for (const Step& step : steps_) {
    next.clear();
    for (size_t k = 0; k < cur.size(); ++k) apply(step, cur[k], at_start && k == 0, next, arena);
    cur.swap(next);
  }
  for (std::string_view p : cur)
    if (!p.empty()) out.push_back(p);
}

void PreTokenizer::apply(const Step& step, std::string_view piece, bool at_start,
                         std::vector<std::string_view>& out, std::deque<std::string>& arena) {
  if (step.metaspace) {
    if (piece.empty()) return;
    std::string s;
    const bool prepend = step.prepend == Prepend::Always || (step.prepend == Prepend::First && at_start);
    const bool starts = piece.substr(0, step.replacement.size()) == step.replacement ||
                        (piece[0] == ' ');  // a leading space becomes the replacement
    if (prepend && !starts) s = step.replacement;
    for (char c : piece) {
      if (c == ' ') s += step.replacement;
      else s += c;
    }
    arena.push_back(std::move(s));
    piece = arena.back();
  }
  if (step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
    arena.push_back(" " + std::string(piece));
    piece = arena.back();
  }
  if (!step.regex) {
    out.push_back(piece);
    return;
  }
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  step.regex->find_all(piece, matches);
  // Alternating (range, is_match) spans covering the piece.
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) spans.push_back({prev, b, step.invert});
    spans.push_back({b, e, !step.invert});
    prev = e;
  }
  if (prev < piece.size()) spans.push_back({prev, piece.size(), step.invert});

  const size_t first = out.size();
  bool merge_next = false;
  for (size_t k = 0; k < spans.size(); ++k) {
    const Span& s = spans[k];
    std::string_view t = piece.substr(s.b, s.e - s.b);
    switch (step.behavior) {
      case Behavior::Isolated:
        out.push_back(t);
        break;
      case Behavior::Removed:
        if (!s.match) out.push_back(t);
        break;
      // As `tokenizers`: a match joins its neighbour only when that neighbour is not a match itself.
      case Behavior::MergedWithPrevious:
        if (s.match && k > 0 && !spans[k - 1].match && out.size() > first)
          out.back() = std::string_view(out.back().data(), out.back().size() + t.size());
        else out.push_back(t);
        break;
      case Behavior::MergedWithNext:
        if (merge_next) out.back() = std::string_view(out.back().data(), out.back().size() + t.size());
        else out.push_back(t);
        merge_next = s.match && k + 1 < spans.size() && !spans[k + 1].match;
        break;
      case Behavior::Contiguous:
        if (s.match && k > 0 && spans[k - 1].match)
          out.back() = std::string_view(out.back().data(), out.back().size() + t.size());
        else out.push_back(t);
        break;
    }
  }
}

}  // namespace hone::tok
