// One-value and string collectives over a host Comm (an MpiComm: host memory): the small exchanges of the GRPO loop
// (a count summed over ranks, a time's max, a resume path from rank 0, the sample texts gathered to rank 0) without
// packing them into buffers at every call. Every member of the group calls them in the same order. Plain header.
//
//   const int64_t total = hone::all_reduce_sum_value(dp, local_count);
//   const std::vector<int64_t> counts = hone::all_gather_value(dp, mine);   // rank order
//   path = hone::broadcast_string(world, path);                              // root 0's string everywhere
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.h"

namespace hone {

namespace detail {
// Error naming op when c moves device buffers (these helpers hand it host memory).
void require_host_comm(const Comm& c, const char* op);
}  // namespace detail

template <typename T>
T all_reduce_sum_value(Comm& c, T v) {
  detail::require_host_comm(c, "all_reduce_sum_value");
  c.all_reduce_sum(&v, 1);
  return v;
}
template <typename T>
T all_reduce_max_value(Comm& c, T v) {
  detail::require_host_comm(c, "all_reduce_max_value");
  c.all_reduce_max(&v, 1);
  return v;
}
template <typename T>
T all_reduce_min_value(Comm& c, T v) {
  detail::require_host_comm(c, "all_reduce_min_value");
  c.all_reduce_min(&v, 1);
  return v;
}
// Every rank's v, in group rank order.
template <typename T>
std::vector<T> all_gather_value(Comm& c, T v) {
  detail::require_host_comm(c, "all_gather_value");
  std::vector<T> all(size_t(c.size()), v);
  c.all_gather(&v, all.data(), 1);
  return all;
}

// root's s on every rank (any length: carried as 8-byte words).
std::string broadcast_string(Comm& c, const std::string& s, int root = 0);
// Every rank's s, in group rank order, on root; an empty vector elsewhere.
std::vector<std::string> gather_strings(Comm& c, const std::string& s, int root = 0);

}  // namespace hone
