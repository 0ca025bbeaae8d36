// agree(): an MPI_Allreduce of "failed" flags, then the failing ranks' messages for the one printed line.
#include "runtime/agree.h"

#include <mpi.h>

#include <climits>

#include "runtime/mpi_check.h"
#include "runtime/mpi_state.h"
#include "runtime/mpi_watchdog.h"
#include "runtime/runtime.h"

namespace hone {

void agree(bool ok, const std::string& message_if_not_ok, int exit_code) {
  if (!mpi_active() || world_size() <= 1) {
    if (!ok) throw AgreedError(exit_code, message_if_not_ok);
    return;
  }
  const int size = world_size();
  // One MAX reduction finds both whether any rank failed and the most serious code (the lowest: 1 before 2 before 3).
  int mine[2] = {ok ? 0 : 1, ok ? INT_MIN : -exit_code}, any[2] = {0, 0};
  // Ranks wait here for each other (a rank may arrive much later): under the watchdog.
  const auto what = [size] {
    return cat("agreement on errors (all_reduce_max of 8 bytes) on the world group (world ranks 0-", size - 1, ")");
  };
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(mine, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
  mpi_wait(&req, what);
  if (any[0] == 0) return;
  std::vector<int> failed(static_cast<size_t>(size));
  MPI_CHECK(MPI_Iallgather(&mine[0], 1, MPI_INT, failed.data(), 1, MPI_INT, MPI_COMM_WORLD, &req));
  mpi_wait(&req, what);
  std::vector<std::string> messages;
  HONE_CHECK(detail::allgather_strings(MPI_COMM_WORLD, ok ? std::string() : message_if_not_ok, &messages),
             "exchanging error messages failed");
  std::vector<int> ranks;
  std::vector<std::string> texts;
  for (int r = 0; r < size; ++r) {
    if (!failed[static_cast<size_t>(r)]) continue;
    ranks.push_back(r);
    texts.push_back(messages[static_cast<size_t>(r)]);
  }
  throw AgreedError(-any[1], detail::merge_rank_messages(ranks, texts, size));
}

namespace detail {

bool allgather_strings(MPI_Comm comm, const std::string& mine, std::vector<std::string>* all) {
  int size = 0;
  if (MPI_Comm_size(comm, &size) != MPI_SUCCESS) return false;
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  if (MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm) != MPI_SUCCESS) return false;
  int total = 0;
  for (int r = 0; r < size; ++r) offsets[static_cast<size_t>(r)] = total, total += lens[static_cast<size_t>(r)];
  std::string bytes(static_cast<size_t>(total), '\0');
  if (MPI_Allgatherv(mine.data(), len, MPI_CHAR, bytes.data(), lens.data(), offsets.data(), MPI_CHAR, comm) !=
      MPI_SUCCESS)
    return false;
  all->clear();
  for (int r = 0; r < size; ++r)
    all->push_back(bytes.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                                static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return true;
}

}  // namespace detail

}  // namespace hone
