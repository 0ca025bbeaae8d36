// MpiComm: the collectives and point-to-point messages over MPI, in pieces of at most 2^30 elements where MPI's int
// counts need it (the all-to-alls take int counts and displacements: larger ones are refused). Every operation is
// started non-blocking and waited on under the watchdog (runtime/mpi_watchdog.h), so that a rank that stops
// answering ends the run with a message naming the operation instead of a hang.
#include "comm/mpi_comm.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "runtime/mpi_check.h"
#include "runtime/mpi_watchdog.h"
#include "runtime/runtime.h"
#include "tensor/dtype.h"

namespace hone {
namespace {

constexpr int64_t kChunk = int64_t(1) << 30;
constexpr int kTag = 7301;  // every point-to-point message of a Comm (MPI keeps them in order per pair)

MPI_Datatype mpi_type(CommType t) {
  switch (t) {
    case CommType::f32: return MPI_FLOAT;
    case CommType::bf16: return MPI_UINT16_T;  // moved as bits; never reduced by MPI
    case CommType::f64: return MPI_DOUBLE;
    case CommType::i64: return MPI_INT64_T;
    case CommType::i32: return MPI_INT32_T;
  }
  return MPI_BYTE;
}

int checked_count(int64_t n, const char* what) {
  HONE_CHECK(n >= 0 && n <= INT_MAX, what, ": ", n, " elements exceed MPI's int count");
  return static_cast<int>(n);
}

std::vector<float> widen(const void* bf16, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(bf16);
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) f[size_t(i)] = bf16_to_f32(h[i]);
  return f;
}

void narrow(const std::vector<float>& f, void* bf16) {
  auto* h = static_cast<uint16_t*>(bf16);
  for (size_t i = 0; i < f.size(); ++i) h[i] = f32_to_bf16(f[i]);
}

}  // namespace

void MpiComm::wait(MPI_Request* requests, int n, const std::string& op, int64_t count, CommType type) const {
  mpi_wait_all(n, requests, [&] {
    if (count < 0) return cat(op, " on the ", describe());  // a barrier moves no data
    return cat(op, " of ", count * int64_t(comm_type_size(type)), " bytes (", count, " x ", comm_type_name(type),
               ") on the ", describe());
  });
}

MpiComm::MpiComm() : world_ranks_{world_rank()} {}

MpiComm::MpiComm(MPI_Comm comm, std::string name) : name_(std::move(name)) {
  if (!mpi_active() || comm == MPI_COMM_NULL) {
    world_ranks_ = {world_rank()};
    return;
  }
  comm_ = comm;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_CHECK(MPI_Comm_group(comm_, &group));
  MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> mine(size_t(size_), 0);
  std::iota(mine.begin(), mine.end(), 0);
  world_ranks_.assign(size_t(size_), -1);
  MPI_CHECK(MPI_Group_translate_ranks(group, size_, mine.data(), world, world_ranks_.data()));
  MPI_CHECK(MPI_Group_free(&group));
  MPI_CHECK(MPI_Group_free(&world));
}

void MpiComm::reduce_op(const char* name, const void* send, void* recv, int64_t count, CommType type, MPI_Op op) {
  const size_t esize = comm_type_size(type);
  if (!distributed()) {
    if (send != recv && count > 0) std::memmove(recv, send, size_t(count) * esize);
    return;
  }
  if (type == CommType::bf16) {
    std::vector<float> f = widen(send, count);
    reduce_op(name, f.data(), f.data(), count, CommType::f32, op);
    narrow(f, recv);
    return;
  }
  const MPI_Datatype dt = mpi_type(type);
  for (int64_t off = 0; off < count; off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    char* r = static_cast<char*>(recv) + size_t(off) * esize;
    const void* s = send == recv ? MPI_IN_PLACE : static_cast<const char*>(send) + size_t(off) * esize;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Iallreduce(s, r, n, dt, op, comm_, &req));
    wait(&req, 1, name, n, type);
  }
}

void MpiComm::all_reduce_sum_raw(const void* send, void* recv, int64_t count, CommType type) {
  reduce_op("all_reduce_sum", send, recv, count, type, MPI_SUM);
}

void MpiComm::all_reduce_max_raw(const void* send, void* recv, int64_t count, CommType type) {
  reduce_op("all_reduce_max", send, recv, count, type, MPI_MAX);
}
void MpiComm::all_reduce_min_raw(const void* send, void* recv, int64_t count, CommType type) {
  reduce_op("all_reduce_min", send, recv, count, type, MPI_MIN);
}

void MpiComm::reduce_scatter_sum_raw(const void* send, void* recv, int64_t recv_count, CommType type) {
  const size_t esize = comm_type_size(type);
  const size_t block = size_t(recv_count) * esize;
  const char* mine = static_cast<const char*>(send) + size_t(rank_) * block;
  if (!distributed()) {
    if (mine != recv && recv_count > 0) std::memmove(recv, mine, block);
    return;
  }
  const int n = checked_count(recv_count, "reduce_scatter");
  if (type == CommType::bf16) {
    std::vector<float> f = widen(send, recv_count * size_), out(static_cast<size_t>(recv_count));
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ireduce_scatter_block(f.data(), out.data(), n, MPI_FLOAT, MPI_SUM, comm_, &req));
    wait(&req, 1, "reduce_scatter_sum", recv_count * size_, CommType::f32);
    narrow(out, recv);
    return;
  }
  // recv may alias this rank's block of send (the in-place convention): reduce into a temporary then.
  const char* send_end = static_cast<const char*>(send) + block * size_t(size_);
  const bool overlaps = static_cast<const char*>(recv) < send_end && static_cast<const char*>(recv) + block > send;
  if (overlaps) {
    std::vector<char> tmp(block);
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ireduce_scatter_block(send, tmp.data(), n, mpi_type(type), MPI_SUM, comm_, &req));
    wait(&req, 1, "reduce_scatter_sum", recv_count * size_, type);
    std::memcpy(recv, tmp.data(), block);
  } else {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, n, mpi_type(type), MPI_SUM, comm_, &req));
    wait(&req, 1, "reduce_scatter_sum", recv_count * size_, type);
  }
}

void MpiComm::all_gather_raw(const void* send, void* recv, int64_t send_count, CommType type) {
  const size_t block = size_t(send_count) * comm_type_size(type);
  char* mine = static_cast<char*>(recv) + size_t(rank_) * block;
  if (!distributed()) {
    if (mine != send && send_count > 0) std::memmove(mine, send, block);
    return;
  }
  const int n = checked_count(send_count, "all_gather");
  const void* s = send == mine ? MPI_IN_PLACE : send;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallgather(s, n, mpi_type(type), recv, n, mpi_type(type), comm_, &req));
  wait(&req, 1, "all_gather", send_count * size_, type);
}

void MpiComm::broadcast_raw(void* buf, int64_t count, CommType type, int root) {
  HONE_CHECK(root >= 0 && root < size_, "broadcast root ", root, " outside the ", name_, " group of ", size_);
  if (!distributed()) return;
  const size_t esize = comm_type_size(type);
  for (int64_t off = 0; off < count; off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ibcast(static_cast<char*>(buf) + size_t(off) * esize, n, mpi_type(type), root, comm_, &req));
    wait(&req, 1, "broadcast", n, type);
  }
}

void MpiComm::barrier() {
  if (!distributed()) return;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm_, &req));
  wait(&req, 1, "barrier", -1, CommType::i32);
}

// ---- point to point ----------------------------------------------------------------------------------------------
// A one-rank group has no other peer: check_peer refuses send and recv there before MPI is involved.

void MpiComm::send_raw(const void* buf, int64_t count, CommType type, int peer) {
  check_peer("send", peer, /*self_allowed=*/false);
  HONE_CHECK(count >= 0, "send of ", count, " elements");
  const size_t esize = comm_type_size(type);
  for (int64_t off = 0; off < count; off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Isend(static_cast<const char*>(buf) + size_t(off) * esize, n, mpi_type(type), peer, kTag, comm_,
                        &req));
    wait(&req, 1, cat("send to rank ", peer), n, type);
  }
}

void MpiComm::recv_raw(void* buf, int64_t count, CommType type, int peer) {
  check_peer("recv", peer, /*self_allowed=*/false);
  HONE_CHECK(count >= 0, "recv of ", count, " elements");
  const size_t esize = comm_type_size(type);
  for (int64_t off = 0; off < count; off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Irecv(static_cast<char*>(buf) + size_t(off) * esize, n, mpi_type(type), peer, kTag, comm_, &req));
    wait(&req, 1, cat("recv from rank ", peer), n, type);
  }
}

// Every piece of the receive and of the send posted at once, then waited for: neither side orders the pair, and
// the pieces match in order (MPI does not overtake messages of one pair and tag).
void MpiComm::send_recv_raw(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                            int source, CommType type) {
  check_peer("send_recv", dest, /*self_allowed=*/true);
  check_peer("send_recv", source, /*self_allowed=*/true);
  HONE_CHECK(send_count >= 0 && recv_count >= 0, "send_recv of ", send_count, " / ", recv_count, " elements");
  const size_t esize = comm_type_size(type);
  check_disjoint("send_recv", send, size_t(send_count) * esize, recv, size_t(recv_count) * esize);
  if (!distributed()) {
    HONE_CHECK(send_count == recv_count, "send_recv to this rank itself: ", send_count, " elements sent, ",
               recv_count, " received");
    if (send_count > 0) std::memcpy(recv, send, size_t(send_count) * esize);
    return;
  }
  std::vector<MPI_Request> requests;
  for (int64_t off = 0; off < recv_count; off += kChunk) {
    requests.push_back(MPI_REQUEST_NULL);
    const int n = static_cast<int>(std::min(kChunk, recv_count - off));
    MPI_CHECK(MPI_Irecv(static_cast<char*>(recv) + size_t(off) * esize, n, mpi_type(type), source, kTag, comm_,
                        &requests.back()));
  }
  for (int64_t off = 0; off < send_count; off += kChunk) {
    requests.push_back(MPI_REQUEST_NULL);
    const int n = static_cast<int>(std::min(kChunk, send_count - off));
    MPI_CHECK(MPI_Isend(static_cast<const char*>(send) + size_t(off) * esize, n, mpi_type(type), dest, kTag, comm_,
                        &requests.back()));
  }
  wait(requests.data(), int(requests.size()),
       cat("send_recv to rank ", dest, " and from rank ", source), send_count + recv_count, type);
}

// Every piece of every transfer posted at once (receives first), then waited for; messages to one peer match the
// peer's receives in the order listed (one tag: MPI does not overtake them).
void MpiComm::exchange_raw(std::span<const PeerTransfer> ops, CommType type) {
  const size_t esize = comm_type_size(type);
  std::vector<MPI_Request> requests;
  for (bool sends : {false, true})
    for (const PeerTransfer& t : ops) {
      if (t.send != sends || t.count == 0) continue;
      check_peer("exchange", t.peer, /*self_allowed=*/false);
      HONE_CHECK(t.count > 0 && t.buf, "exchange of ", t.count, " elements on the ", describe());
      for (int64_t off = 0; off < t.count; off += kChunk) {
        requests.push_back(MPI_REQUEST_NULL);
        const int n = static_cast<int>(std::min(kChunk, t.count - off));
        char* p = static_cast<char*>(const_cast<void*>(t.buf)) + size_t(off) * esize;
        if (sends) MPI_CHECK(MPI_Isend(p, n, mpi_type(type), t.peer, kTag, comm_, &requests.back()));
        else MPI_CHECK(MPI_Irecv(p, n, mpi_type(type), t.peer, kTag, comm_, &requests.back()));
      }
    }
  if (!requests.empty()) MPI_CHECK(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
}

// ---- all to all --------------------------------------------------------------------------------------------------

void MpiComm::all_to_all_raw(const void* send, void* recv, int64_t count, CommType type) {
  HONE_CHECK(count >= 0, "all_to_all of ", count, " elements per rank");
  const size_t block = size_t(count) * comm_type_size(type);
  check_disjoint("all_to_all", send, block * size_t(size_), recv, block * size_t(size_));
  if (!distributed()) {
    if (count > 0) std::memcpy(recv, send, block);
    return;
  }
  const int n = checked_count(count, "all_to_all");
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ialltoall(send, n, mpi_type(type), recv, n, mpi_type(type), comm_, &req));
  wait(&req, 1, "all_to_all", count * size_, type);
}

void MpiComm::all_to_allv_raw(const void* send, std::span<const int64_t> send_counts,
                              std::span<const int64_t> send_displs, void* recv, std::span<const int64_t> recv_counts,
                              std::span<const int64_t> recv_displs, CommType type) {
  check_all_to_allv(send_counts, send_displs, recv_counts, recv_displs);
  const size_t esize = comm_type_size(type);
  int64_t send_end = 0, recv_end = 0;
  for (size_t r = 0; r < size_t(size_); ++r) {
    if (send_counts[r] > 0) send_end = std::max(send_end, send_displs[r] + send_counts[r]);
    if (recv_counts[r] > 0) recv_end = std::max(recv_end, recv_displs[r] + recv_counts[r]);
  }
  check_disjoint("all_to_allv", send, size_t(send_end) * esize, recv, size_t(recv_end) * esize);
  if (!distributed()) {
    HONE_CHECK(send_counts[0] == recv_counts[0], "all_to_allv on one rank: ", send_counts[0], " elements sent, ",
               recv_counts[0], " received");
    if (send_counts[0] > 0)
      std::memcpy(static_cast<char*>(recv) + size_t(recv_displs[0]) * esize,
                  static_cast<const char*>(send) + size_t(send_displs[0]) * esize, size_t(send_counts[0]) * esize);
    return;
  }
  const size_t P = static_cast<size_t>(size_);
  std::vector<int> sc(P), sd(P), rc(P), rd(P);
  for (size_t r = 0; r < size_t(size_); ++r) {
    sc[r] = checked_count(send_counts[r], "all_to_allv");
    sd[r] = checked_count(send_displs[r], "all_to_allv displacement");
    rc[r] = checked_count(recv_counts[r], "all_to_allv");
    rd[r] = checked_count(recv_displs[r], "all_to_allv displacement");
  }
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ialltoallv(send, sc.data(), sd.data(), mpi_type(type), recv, rc.data(), rd.data(), mpi_type(type),
                           comm_, &req));
  wait(&req, 1, "all_to_allv", send_end, type);
}

}  // namespace hone
