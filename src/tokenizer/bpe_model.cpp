// BPE merges by rank over byte symbols.
#include "tokenizer/bpe_model.h"

#include <queue>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace hone::tok {

namespace {

std::string byte_token(unsigned b) {
  static const char* const hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, bool byte_level) : byte_level_(byte_level) {
  const std::string type = model.value("type", "BPE");
  HONE_USER_CHECK(type == "BPE", "tokenizer.json: unsupported model type '", type, "' (only BPE is supported)");
  HONE_USER_CHECK(model.value("dropout", nlohmann::json()).is_null(), "tokenizer.json: BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    HONE_USER_CHECK(it == model.end() || it->is_null() || it->get<std::string>().empty(), "tokenizer.json: BPE ",
                    key, " is not supported");
  }
  ignore_merges_ = model.value("ignore_merges", false);
  byte_fallback_ = model.value("byte_fallback", false);
  fuse_unk_ = model.value("fuse_unk", false);

  const auto& vocab = model.at("vocab");
  HONE_USER_CHECK(vocab.is_object(), "tokenizer.json: the BPE vocabulary is not an object {token: id}");
  // Ids index dense tables: an id must be an integer, and gaps are bounded, so that one entry cannot make hone
  // allocate gigabytes (or wrap a float like 2e46 into an int).
  const int64_t id_limit = static_cast<int64_t>(vocab.size()) + 65536;
  auto vocab_id = [&](const nlohmann::json& v) {
    HONE_USER_CHECK(v.is_number_integer(), "tokenizer.json: a vocabulary id is not an integer: ", v.dump());
    const bool ok = v.is_number_unsigned() ? v.get<uint64_t>() < uint64_t(id_limit) : v.get<int64_t>() >= 0;
    HONE_USER_CHECK(ok, "tokenizer.json: vocabulary id ", v.dump(), " is out of range (0 to ", id_limit - 1,
                    " for ", vocab.size(), " entries)");
    return static_cast<int32_t>(v.get<int64_t>());
  };
  int32_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) max_id = std::max(max_id, vocab_id(it.value()));
  tokens_.resize(static_cast<size_t>(max_id + 1));
  bytes_.resize(tokens_.size());
  present_.assign(tokens_.size(), 0);
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  std::string raw;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = vocab_id(it.value());
    HONE_USER_CHECK(id >= 0, "tokenizer.json: negative id in the vocabulary");
    const auto i = static_cast<size_t>(id);
    tokens_[i] = it.key();
    if (!present_[i]) ++entry_count_;
    present_[i] = 1;
    if (!byte_level_ || !alphabet.to_bytes(it.key(), &raw)) raw = it.key();
    bytes_[i] = raw;
  }
  by_token_.build(&tokens_, present_);
  by_bytes_.build(&bytes_, present_);
  // A byte-level vocabulary may lack some bytes (SmolLM2 has no token for 21 of them): those are dropped or unk.
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = byte_level_ ? token_to_id(alphabet.char_of(static_cast<unsigned char>(b))) : -1;
    fallback_ids_[b] = byte_fallback_ ? token_to_id(byte_token(static_cast<unsigned>(b))) : -1;
  }
  const nlohmann::json unk = model.value("unk_token", nlohmann::json());
  if (!unk.is_null()) {
    HONE_USER_CHECK(unk.is_string(), "tokenizer.json: the BPE unk_token is not a string");
    unk_ = token_to_id(unk.get<std::string>());
    HONE_USER_CHECK(unk_ >= 0, "tokenizer.json: the BPE unk_token '", unk.get<std::string>(),
                    "' is not in the vocabulary");
  }

  const auto& merges = model.at("merges");
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ', 1);
      HONE_USER_CHECK(sp != std::string::npos, "tokenizer.json: bad merge '", s, "'");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {  // ["a", "b"]
      a = m.at(0).get_ref<const std::string&>();
      b = m.at(1).get_ref<const std::string&>();
    }
    const int32_t ia = token_to_id(a), ib = token_to_id(b), im = token_to_id(a + b);
    HONE_USER_CHECK(ia >= 0 && ib >= 0 && im >= 0, "tokenizer.json: merge '", a, " ", b,
                    "' names a token missing from the vocabulary");
    merges_.insert(ia, ib, Merge{rank, im});  // the first (lowest) rank of a duplicate pair wins
    ++rank;
  }
}

// Quadratic in the worst case but with one merge lookup per new pair: fast for ordinary pieces.
void BpeModel::merge_small(std::vector<int32_t>& syms) const {
  constexpr int32_t kNone = INT32_MAX;
  std::vector<int32_t> rank(syms.size(), kNone), merged(syms.size(), -1);  // rank[i]: pair (i, i+1)
  auto refresh = [&](size_t i) {
    const Merge* m = i + 1 < syms.size() ? find_merge(syms[i], syms[i + 1]) : nullptr;
    rank[i] = m ? m->rank : kNone;
    merged[i] = m ? m->merged : -1;
  };
  for (size_t i = 0; i + 1 < syms.size(); ++i) refresh(i);
  while (syms.size() > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < syms.size(); ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == kNone) break;
    syms[best] = merged[best];
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    rank.erase(rank.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    refresh(best);
    if (best > 0) refresh(best - 1);
  }
}

// Priority queue over (rank, position) with a linked list of symbols: O(n log n) for very long pieces.
void BpeModel::merge_large(std::vector<int32_t>& syms) const {
  const size_t n = syms.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  using Entry = std::pair<int32_t, int32_t>;  // (rank, left position): smallest first
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  auto push = [&](int32_t left) {
    if (left < 0 || next[static_cast<size_t>(left)] < 0) return;
    const Merge* m = find_merge(syms[static_cast<size_t>(left)], syms[static_cast<size_t>(next[static_cast<size_t>(left)])]);
    if (m) queue.emplace(m->rank, left);
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!queue.empty()) {
    const auto [rank, left] = queue.top();
    queue.pop();
    const auto l = static_cast<size_t>(left);
    if (!alive[l] || next[l] < 0) continue;
    const auto r = static_cast<size_t>(next[l]);
    const Merge* m = find_merge(syms[l], syms[r]);
    if (!m || m->rank != rank) continue;  // stale entry
    syms[l] = m->merged;
    alive[r] = 0;
    next[l] = next[r];
    if (next[r] >= 0) prev[static_cast<size_t>(next[r])] = left;
    push(prev[l]);
    push(left);
  }
  std::vector<int32_t> out;
  for (int32_t i = 0; i >= 0; i = next[static_cast<size_t>(i)]) out.push_back(syms[static_cast<size_t>(i)]);
  syms.swap(out);
}

// As `tokenizers` builds a word: an unknown symbol is held back (pending) and written when the next symbol found
// in the vocabulary comes, or at the end; with fuse_unk further unknown symbols join the held one. Byte-fallback
// tokens do not write a held unk (they come before it).
void BpeModel::missing_symbol(std::string_view unit, std::vector<int32_t>& syms, bool& pending_unk) const {
  if (byte_fallback_) {
    bool all = true;
    for (char c : unit) all = all && fallback_ids_[static_cast<unsigned char>(c)] >= 0;
    if (all) {
      for (char c : unit) syms.push_back(fallback_ids_[static_cast<unsigned char>(c)]);
      return;
    }
  }
  if (unk_ < 0) return;  // dropped
  if (pending_unk && !fuse_unk_) syms.push_back(unk_);
  pending_unk = true;
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<int32_t>& syms) const {
  syms.reserve(piece.size());
  bool pending_unk = false;
  auto known = [&](int32_t id) {
    if (pending_unk) syms.push_back(unk_);
    pending_unk = false;
    syms.push_back(id);
  };
  if (byte_level_) {
    const ByteLevelAlphabet& alphabet = byte_level_alphabet();
    for (char c : piece) {
      const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
      if (id >= 0) known(id);
      else missing_symbol(alphabet.char_of(static_cast<unsigned char>(c)), syms, pending_unk);
    }
  } else {
    size_t i = 0;
    while (i < piece.size()) {
      const size_t b = i;
      utf8_next(piece, i);
      const std::string_view unit = piece.substr(b, i - b);
      const int32_t id = token_to_id(unit);
      if (id >= 0) known(id);
      else missing_symbol(unit, syms, pending_unk);
    }
  }
  if (pending_unk) syms.push_back(unk_);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  if (piece.size() == 1 && byte_level_ && byte_ids_[static_cast<unsigned char>(piece[0])] >= 0) {
    ids.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  const bool cacheable = piece.size() <= kCacheMaxPiece;
  Shard* shard = nullptr;
  uint64_t hash = 0;
  if (cacheable) {
    hash = hash_bytes(piece);
    shard = &cache_[hash % kShards];
    std::lock_guard<std::mutex> lock(shard->mu);
    if (shard->cache.lookup(piece, hash, ids)) return;
  }
  std::vector<int32_t> syms;
  const int32_t whole = ignore_merges_ ? (byte_level_ ? bytes_to_id(piece) : token_to_id(piece)) : -1;
  if (whole >= 0) {
    syms.push_back(whole);
  } else {
    initial_symbols(piece, syms);
    if (syms.size() <= 256) merge_small(syms);
    else merge_large(syms);
  }
  ids.insert(ids.end(), syms.begin(), syms.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(shard->mu);
    shard->cache.insert(piece, hash, syms);
  }
}

}  // namespace hone::tok
