// Strings over a host Comm: a length, then the bytes as int64 words (Comm carries no byte type); the gather sends
// each rank's words to the root, which receives them in rank order.
#include "comm/host_collectives.h"

#include <cstring>

#include "runtime/error.h"

namespace hone {
namespace {

std::vector<int64_t> to_words(const std::string& s) {
  std::vector<int64_t> w((s.size() + 7) / 8, 0);
  if (!s.empty()) std::memcpy(w.data(), s.data(), s.size());
  return w;
}

std::string from_words(const std::vector<int64_t>& w, int64_t n) {
  return n > 0 ? std::string(reinterpret_cast<const char*>(w.data()), size_t(n)) : std::string();
}

}  // namespace

namespace detail {
void require_host_comm(const Comm& c, const char* op) {
  HONE_CHECK(!c.on_device(), op, " takes host memory: the ", c.describe(), " moves device buffers");
}
}  // namespace detail

std::string broadcast_string(Comm& c, const std::string& s, int root) {
  detail::require_host_comm(c, "broadcast_string");
  HONE_CHECK(root >= 0 && root < c.size(), "broadcast root ", root, " outside the ", c.describe());
  if (c.size() == 1) return s;
  int64_t n = int64_t(s.size());
  c.broadcast(&n, 1, root);
  std::vector<int64_t> words = c.rank() == root ? to_words(s) : std::vector<int64_t>(size_t((n + 7) / 8), 0);
  c.broadcast(words.data(), int64_t(words.size()), root);
  return from_words(words, n);
}

std::vector<std::string> gather_strings(Comm& c, const std::string& s, int root) {
  detail::require_host_comm(c, "gather_strings");
  HONE_CHECK(root >= 0 && root < c.size(), "gather root ", root, " outside the ", c.describe());
  if (c.size() == 1) return {s};
  const std::vector<int64_t> sizes = all_gather_value(c, int64_t(s.size()));
  if (c.rank() != root) {
    const std::vector<int64_t> words = to_words(s);
    if (!words.empty()) c.send(words.data(), int64_t(words.size()), root);
    return {};
  }
  std::vector<std::string> out;
  for (int r = 0; r < c.size(); ++r) {
    if (r == root) {
      out.push_back(s);
      continue;
    }
    std::vector<int64_t> words(size_t((sizes[size_t(r)] + 7) / 8), 0);
    if (!words.empty()) c.recv(words.data(), int64_t(words.size()), r);
    out.push_back(from_words(words, sizes[size_t(r)]));
  }
  return out;
}

}  // namespace hone
