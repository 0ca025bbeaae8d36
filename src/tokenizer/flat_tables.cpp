// Open-addressing tables of the BPE hot path.
#include "tokenizer/flat_tables.h"

namespace hone::tok {

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  size_ = 0;
  for (const Slot& s : old)
    if (s.key != kEmpty) insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xffffffffU), s.merge);
}

void MergeTable::insert(int32_t a, int32_t b, Merge m) {
  if ((size_ + 1) * 2 > slots_.size()) reserve(size_ + 1 > 8 ? (size_ + 1) * 2 : 16);
  const uint64_t key = pack(a, b);
  for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) return;
    if (s.key == kEmpty) {
      s.key = key;
      s.merge = m;
      ++size_;
      return;
    }
  }
}

void StringIndex::build(const std::vector<std::string>* keys, const std::vector<char>& present) {
  keys_ = keys;
  size_t cap = 16;
  while (cap < keys->size() * 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (size_t id = 0; id < keys->size(); ++id) {
    if (!present[id]) continue;
    const std::string& key = (*keys)[id];
    const uint64_t h = hash_bytes(key);
    const uint32_t t = static_cast<uint32_t>(h >> 32) | 1U;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.tag == 0) {
        s.tag = t;
        s.id = static_cast<int32_t>(id);
        break;
      }
      if (s.tag == t && (*keys)[static_cast<size_t>(s.id)] == key) break;
    }
  }
}

void PieceCache::clear() {
  slots_.assign(256, Slot{});
  keys_.clear();
  ids_.clear();
  size_ = 0;
}

void PieceCache::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.hash == 0) continue;
    size_t i = home(s.hash);
    while (slots_[i].hash != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

bool PieceCache::lookup(std::string_view piece, uint64_t hash, std::vector<int32_t>& out) const {
  const size_t mask = slots_.size() - 1;
  const uint32_t t = tag(hash);
  for (size_t i = home(t);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == t && s.key_len == piece.size() && key_of(s) == piece) {
      if (s.ids_len <= 2) out.insert(out.end(), s.inline_ids, s.inline_ids + s.ids_len);
      else out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
      return true;
    }
  }
}

void PieceCache::insert(std::string_view piece, uint64_t hash, const std::vector<int32_t>& ids) {
  if (piece.size() > 0xFFFF || ids.size() > 0xFFFF) return;
  if (size_ >= max_entries_ || keys_.size() + piece.size() > UINT32_MAX / 2 || ids_.size() + ids.size() > UINT32_MAX / 2)
    clear();
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const size_t mask = slots_.size() - 1;
  const uint32_t t = tag(hash);
  for (size_t i = home(t);; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.hash != 0) {
      if (s.hash == t && s.key_len == piece.size() && key_of(s) == piece) return;
      continue;
    }
    s.hash = t;
    s.key_len = static_cast<uint16_t>(piece.size());
    s.ids_len = static_cast<uint16_t>(ids.size());
    if (piece.size() <= 8) {
      piece.copy(s.inline_key, piece.size());
    } else {
      s.key_off = static_cast<uint32_t>(keys_.size());
      keys_.append(piece);
    }
    if (ids.size() <= 2) {
      for (size_t k = 0; k < ids.size(); ++k) s.inline_ids[k] = ids[k];
    } else {
      s.ids_off = static_cast<uint32_t>(ids_.size());
      ids_.insert(ids_.end(), ids.begin(), ids.end());
    }
    ++size_;
    return;
  }
}

}  // namespace hone::tok
