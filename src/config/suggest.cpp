// "Did you mean ...?": the schema key or section nearest to a misspelled one, by edit distance.
// A key is compared by its full path and, across sections, by its last component (a key put in the wrong
// section, `[grpo] temperature`, finds `generation.temperature`).
#include <algorithm>
#include <cctype>
#include <vector>

#include "config/config.h"

namespace hone {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and adjacent transpositions cost 1.
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Close enough to suggest: a third of the name's length, at least 2 edits.
size_t tolerance(const std::string& name) { return std::max<size_t>(2, name.size() / 3); }

}  // namespace

std::string suggest_key(const std::string& unknown_in) {
  const std::string unknown = lower(unknown_in);
  const size_t dot = unknown.rfind('.');
  const std::string leaf = dot == std::string::npos ? unknown : unknown.substr(dot + 1);
  const std::string section = dot == std::string::npos ? "" : unknown.substr(0, dot);
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (const auto& k : deck_schema()) {
    size_t d = edit_distance(unknown, k.path);
    // The right name in another section: one edit for the move, so a close key in the same section wins.
    const size_t moved = edit_distance(leaf, k.name()) + (section == k.section() ? 0 : 1);
    d = std::min(d, moved);
    if (d < best_d) {
      best_d = d;
      best = k.path;
    }
  }
  return best_d <= tolerance(leaf) ? best : "";
}

std::string suggest_section(const std::string& unknown_in) {
  const std::string unknown = lower(unknown_in);
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (const auto& s : deck_sections()) {
    const size_t d = edit_distance(unknown, s.name);
    if (d < best_d) {
      best_d = d;
      best = s.name;
    }
  }
  return best_d <= std::max<size_t>(1, unknown.size() / 3) ? best : "";
}

}  // namespace hone
