// The data-parallel collectives of the GRPO loop, in one place: every MPI call the loop makes goes through here,
// over the data-parallel group's MpiComm (comm/mpi_comm.h). With tp = pp = 1 the
// data-parallel group is MPI_COMM_WORLD. Without MPI (or with one rank) every call is local. Plain header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hone {
class Comm;
}

namespace hone::rl::dp {

// The data-parallel group's host Comm (an MpiComm; a local group of one without MPI): for the CPU optimizers and
// to bootstrap NCCL. Valid until MPI starts or stops.
Comm& host_comm();

int rank();  // this rank's data-parallel index
int size();  // data-parallel ranks

// In-place element-wise reductions over all ranks (every rank gets the result).
void sum(float* x, int64_t n);
void sum(double* x, int64_t n);
void sum(int64_t* x, int64_t n);
void max(double* x, int64_t n);
void min(double* x, int64_t n);

inline double sum(double v) { sum(&v, 1); return v; }
inline int64_t sum(int64_t v) { sum(&v, 1); return v; }
inline double max(double v) { max(&v, 1); return v; }

// Every rank's value, in rank order.
std::vector<int64_t> all_gather(int64_t v);

// Rank 0's string on every rank.
std::string broadcast(const std::string& s);
// Every rank's string in rank order on rank 0; empty elsewhere.
std::vector<std::string> gather_to_root(const std::string& s);

void barrier();

}  // namespace hone::rl::dp
