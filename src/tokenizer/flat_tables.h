// Two small open-addressing hash tables for the BPE hot path, where std::unordered_map's node chasing and
// string allocations dominated: MergeTable (pair of ids -> merge rank and result) and PieceCache (piece bytes
// -> ids, no allocation on a hit). Linear probing, power-of-two capacity.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hone::tok {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL ^ s.size();
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return mix64(h);
}

class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  void reserve(size_t n);
  // Keeps the first insertion of a key (the lowest rank of a duplicate merge).
  void insert(int32_t a, int32_t b, Merge m);
  const Merge* find(int32_t a, int32_t b) const {
    const uint64_t key = pack(a, b);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ULL;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{0, 0};
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0;
};

// Index of a vocabulary: key string -> id, where the keys live in a vector indexed by id (8-byte slots; the
// key itself is compared only on a hash-tag match). Duplicate keys keep the first id inserted.
class StringIndex {
 public:
  // keys[id] for every id with present[id] != 0.
  void build(const std::vector<std::string>* keys, const std::vector<char>& present);
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    const uint32_t t = static_cast<uint32_t>(h >> 32) | 1U;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.tag == 0) return -1;
      if (s.tag == t && (*keys_)[static_cast<size_t>(s.id)] == key) return s.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag = 0;
    int32_t id = -1;
  };
  const std::vector<std::string>* keys_ = nullptr;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Not thread-safe by itself (BpeModel holds one per lock shard).
class PieceCache {
 public:
  // Pieces longer than 65535 bytes or with more than 65535 ids are not cached.
  // Starts small and doubles up to max_entries; when full it starts over empty.
  explicit PieceCache(size_t max_entries = 1 << 14) : max_entries_(max_entries) { clear(); }
  // Appends the cached ids of piece to out; false when absent.
  bool lookup(std::string_view piece, uint64_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, uint64_t hash, const std::vector<int32_t>& ids);
  void clear();

 private:
  // 24 bytes; keys of up to 8 bytes and up to 2 ids are stored inline, so a typical hit touches one cache line.
  struct Slot {
    uint32_t hash = 0;  // high half of the 64-bit hash; 0 marks an empty slot (real hashes get bit 0 set)
    uint16_t key_len = 0, ids_len = 0;
    union {
      char inline_key[8];
      uint32_t key_off;
    };
    union {
      int32_t inline_ids[2];
      uint32_t ids_off;
    };
  };
  static uint32_t tag(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1U; }
  size_t home(uint32_t t) const { return (t >> 1) & (slots_.size() - 1); }  // rehashing needs only the tag
  void grow();
  std::string_view key_of(const Slot& s) const {
    return s.key_len <= 8 ? std::string_view(s.inline_key, s.key_len) : std::string_view(keys_).substr(s.key_off, s.key_len);
  }
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t max_entries_, size_ = 0;
};

}  // namespace hone::tok
