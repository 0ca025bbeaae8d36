// Comm's shared helpers: the description for messages and the argument checks every implementation makes.
#include "comm/comm.h"

#include "runtime/error.h"
#include "runtime/runtime.h"

namespace hone {

std::string Comm::describe() const {
  return cat(name(), " group (world ranks ", detail::rank_ranges(world_ranks()), ")");
}

void Comm::exchange_raw(std::span<const PeerTransfer> ops, CommType type) {
  const PeerTransfer* send = nullptr;
  const PeerTransfer* recv = nullptr;
  for (const PeerTransfer& t : ops) {
    if (t.count == 0) continue;
    check_peer("exchange", t.peer, /*self_allowed=*/false);
    HONE_CHECK(t.count > 0 && t.buf, "exchange of ", t.count, " elements on the ", describe());
    const PeerTransfer*& slot = t.send ? send : recv;
    HONE_CHECK(!slot, "the ", describe(), " exchanges one send and one receive at a time");
    slot = &t;
  }
  if (send && recv) send_recv_raw(send->buf, send->count, send->peer, const_cast<void*>(recv->buf), recv->count,
                                  recv->peer, type);
  else if (send) send_raw(send->buf, send->count, type, send->peer);
  else if (recv) recv_raw(const_cast<void*>(recv->buf), recv->count, type, recv->peer);
}

void Comm::check_peer(const char* op, int peer, bool self_allowed) const {
  HONE_CHECK(peer >= 0 && peer < size(), op, ": peer ", peer, " outside the ", describe(), " of ", size(), " ranks");
  HONE_CHECK(self_allowed || peer != rank(), op, " to this rank itself (", peer, ") on the ", describe(),
             ": use send_recv");
}

void Comm::check_all_to_allv(std::span<const int64_t> send_counts, std::span<const int64_t> send_displs,
                             std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs) const {
  const size_t n = size_t(size());
  HONE_CHECK(send_counts.size() == n && send_displs.size() == n && recv_counts.size() == n && recv_displs.size() == n,
             "all_to_allv on the ", describe(), ": counts and displacements need ", n, " entries each (got ",
             send_counts.size(), ", ", send_displs.size(), ", ", recv_counts.size(), ", ", recv_displs.size(), ")");
  for (size_t r = 0; r < n; ++r)
    HONE_CHECK(send_counts[r] >= 0 && send_displs[r] >= 0 && recv_counts[r] >= 0 && recv_displs[r] >= 0,
               "all_to_allv on the ", describe(), ": negative count or displacement for rank ", r);
}

void Comm::check_disjoint(const char* op, const void* send, size_t send_bytes, const void* recv,
                          size_t recv_bytes) const {
  if (send_bytes == 0 || recv_bytes == 0) return;
  const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  HONE_CHECK(s + send_bytes <= r || r + recv_bytes <= s, op, " on the ", describe(),
             ": the send and receive buffers overlap (it is never in place)");
}

}  // namespace hone
