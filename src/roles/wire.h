// The wire form of what the roles send each other between ranks (rollouts, their rewards and records, loss
// metrics): one byte format, and for each record type ONE list of its fields, `fields(a, x)`, that both directions
// run, so encoding and decoding cannot disagree. A field is a number (arithmetic or enum, native byte order: the
// ranks of a job share one architecture), a bool, a string, a vector or pair of fields, or a struct with its own
// `fields`. Reading checks every length against the bytes left and names the message that ends early.
//
//   template <class A> void fields(A& a, RewardScore& s) { a(s.name, s.value); }
//   std::string bytes = wire_encode(score);   RewardScore back = wire_decode<RewardScore>(bytes, "a reward score");
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace hone {

class WireWriter {
 public:
  template <typename... T>
  void operator()(const T&... x) {
    (put(x), ...);
  }
  std::string& bytes() { return out_; }

 private:
  template <typename T>
  void put(const T& x) {
    if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
      out_.append(reinterpret_cast<const char*>(&x), sizeof x);
    } else if constexpr (std::is_same_v<T, std::string>) {
      put(uint64_t(x.size()));
      out_ += x;
    } else {
      // A struct with a field list; the writer only reads through it.
      fields(*this, const_cast<T&>(x));
    }
  }
  template <typename T>
  void put(const std::vector<T>& v) {
    put(uint64_t(v.size()));
    if constexpr (std::is_arithmetic_v<T>) {
      out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
    } else {
      for (const T& x : v) put(x);
    }
  }
  template <typename A, typename B>
  void put(const std::pair<A, B>& p) {
    put(p.first);
    put(p.second);
  }
  std::string out_;
};

class WireReader {
 public:
  // what: the message, for the error of one that ends early ("a rollout message").
  WireReader(const char* data, size_t size, const char* what) : p_(data), end_(data + size), what_(what) {}
  WireReader(const std::string& in, const char* what) : WireReader(in.data(), in.size(), what) {}

  template <typename... T>
  void operator()(T&... x) {
    (get(x), ...);
  }
  template <typename T>
  T read() {
    T x{};
    get(x);
    return x;
  }
  bool done() const { return p_ >= end_; }
  size_t left() const { return size_t(end_ - p_); }

 private:
  void take(void* dst, size_t n) {
    HONE_CHECK(n <= left(), what_, " ends early (", n, " bytes wanted, ", left(), " left)");
    if (n > 0) std::memcpy(dst, p_, n);
    p_ += n;
  }
  size_t count(size_t element_bytes) {
    uint64_t n = 0;
    take(&n, sizeof n);
    HONE_CHECK(element_bytes == 0 || n <= left() / element_bytes, what_, " ends early (", n, " elements of ",
               element_bytes, " bytes, ", left(), " bytes left)");
    return size_t(n);
  }
  template <typename T>
  void get(T& x) {
    if constexpr (std::is_same_v<T, bool>) {
      uint8_t b = 0;
      take(&b, 1);
      HONE_CHECK(b <= 1, what_, " holds a bool of ", int(b));
      x = b != 0;
    } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
      take(&x, sizeof x);
    } else if constexpr (std::is_same_v<T, std::string>) {
      x.resize(count(1));
      take(x.data(), x.size());
    } else {
      fields(*this, x);
    }
  }
  template <typename T>
  void get(std::vector<T>& v) {
    if constexpr (std::is_arithmetic_v<T>) {
      v.resize(count(sizeof(T)));
      take(v.data(), v.size() * sizeof(T));
    } else {
      v.resize(count(1));  // every element takes at least a byte
      for (T& x : v) get(x);
    }
  }
  template <typename A, typename B>
  void get(std::pair<A, B>& p) {
    get(p.first);
    get(p.second);
  }
  const char* p_;
  const char* end_;
  const char* what_;
};

// A bool goes as one byte (0 or 1), whatever sizeof(bool) is.
template <>
inline void WireWriter::put<bool>(const bool& x) {
  const uint8_t b = x ? 1 : 0;
  out_.append(reinterpret_cast<const char*>(&b), 1);
}

template <typename T>
std::string wire_encode(const T& x) {
  WireWriter w;
  w(x);
  return std::move(w.bytes());
}
// The whole message is one T: bytes left over are an error too.
template <typename T>
T wire_decode(const std::string& bytes, const char* what) {
  WireReader r(bytes, what);
  T x = r.read<T>();
  HONE_CHECK(r.done(), what, " has ", r.left(), " bytes past its end");
  return x;
}

}  // namespace hone
