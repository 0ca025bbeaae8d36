// MpiComm: the collectives over MPI, in pieces of at most 2^30 elements where MPI's int counts need it.
#include "comm/mpi_comm.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "runtime/mpi_check.h"
#include "runtime/runtime.h"
#include "tensor/dtype.h"

namespace hone {
namespace {

constexpr int64_t kChunk = int64_t(1) << 30;

MPI_Datatype mpi_type(CommType t) {
  switch (t) {
    case CommType::f32: return MPI_FLOAT;
    case CommType::bf16: return MPI_UINT16_T;  // moved as bits; never reduced by MPI
    case CommType::f64: return MPI_DOUBLE;
    case CommType::i64: return MPI_INT64_T;
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

void MpiComm::reduce_op(const void* send, void* recv, int64_t count, CommType type, MPI_Op op) {
  const size_t esize = comm_type_size(type);
  if (!distributed()) {
    if (send != recv && count > 0) std::memmove(recv, send, size_t(count) * esize);
    return;
  }
  if (type == CommType::bf16) {
    HONE_CHECK(op == MPI_SUM, "bf16 reduces by sum only");
    std::vector<float> f = widen(send, count);
    reduce_op(f.data(), f.data(), count, CommType::f32, MPI_SUM);
    narrow(f, recv);
    return;
  }
  const MPI_Datatype dt = mpi_type(type);
  for (int64_t off = 0; off < count; off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    char* r = static_cast<char*>(recv) + size_t(off) * esize;
    const void* s = send == recv ? MPI_IN_PLACE : static_cast<const char*>(send) + size_t(off) * esize;
    MPI_CHECK(MPI_Allreduce(s, r, n, dt, op, comm_));
  }
}

void MpiComm::all_reduce_sum_raw(const void* send, void* recv, int64_t count, CommType type) {
  reduce_op(send, recv, count, type, MPI_SUM);
}

void MpiComm::all_reduce_max(double* x, int64_t n) { reduce_op(x, x, n, CommType::f64, MPI_MAX); }
void MpiComm::all_reduce_min(double* x, int64_t n) { reduce_op(x, x, n, CommType::f64, MPI_MIN); }

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
    MPI_CHECK(MPI_Reduce_scatter_block(f.data(), out.data(), n, MPI_FLOAT, MPI_SUM, comm_));
    narrow(out, recv);
    return;
  }
  // recv may alias this rank's block of send (the in-place convention): reduce into a temporary then.
  const char* send_end = static_cast<const char*>(send) + block * size_t(size_);
  const bool overlaps = static_cast<const char*>(recv) < send_end && static_cast<const char*>(recv) + block > send;
  if (overlaps) {
    std::vector<char> tmp(block);
    MPI_CHECK(MPI_Reduce_scatter_block(send, tmp.data(), n, mpi_type(type), MPI_SUM, comm_));
    std::memcpy(recv, tmp.data(), block);
  } else {
    MPI_CHECK(MPI_Reduce_scatter_block(send, recv, n, mpi_type(type), MPI_SUM, comm_));
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
  MPI_CHECK(MPI_Allgather(s, n, mpi_type(type), recv, n, mpi_type(type), comm_));
}

void MpiComm::broadcast_raw(void* buf, int64_t count, CommType type, int root) {
  HONE_CHECK(root >= 0 && root < size_, "broadcast root ", root, " outside the ", name_, " group of ", size_);
  if (!distributed()) return;
  const size_t esize = comm_type_size(type);
  for (int64_t off = 0; off < count; off += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, count - off));
    MPI_CHECK(MPI_Bcast(static_cast<char*>(buf) + size_t(off) * esize, n, mpi_type(type), root, comm_));
  }
}

std::string MpiComm::broadcast_string(const std::string& s, int root) {
  if (!distributed()) return s;
  int64_t n = int64_t(s.size());
  broadcast(&n, 1, root);
  std::string out = rank_ == root ? s : std::string(size_t(n), '\0');
  if (n > 0) MPI_CHECK(MPI_Bcast(out.data(), checked_count(n, "broadcast"), MPI_CHAR, root, comm_));
  return out;
}

std::vector<std::string> MpiComm::gather_strings(const std::string& s, int root) {
  if (!distributed()) return {s};
  HONE_CHECK(root >= 0 && root < size_, "gather root ", root, " outside the ", describe());
  const int mine = checked_count(int64_t(s.size()), "gather");
  std::vector<int> sizes(size_t(size_), 0), offsets(size_t(size_), 0);
  MPI_CHECK(MPI_Gather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, comm_));
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[size_t(r)] = checked_count(total, "gather");
    total += sizes[size_t(r)];
  }
  std::string all(rank_ == root ? size_t(total) : 0, '\0');
  MPI_CHECK(MPI_Gatherv(s.data(), mine, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, root, comm_));
  if (rank_ != root) return {};
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(sizes[size_t(r)])));
  return out;
}

void MpiComm::barrier() {
  if (distributed()) MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace hone
