// The throw path of MPI_CHECK.
#include "runtime/mpi_check.h"

namespace hone::detail {

void mpi_call_failed(int code, const char* expr, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING + 1] = {};
  int len = 0;
  std::string reason;
  if (MPI_Error_string(code, text, &len) == MPI_SUCCESS && len > 0)
    reason = std::string(text, static_cast<size_t>(len));
  else
    reason = cat("MPI error code ", code);
  call_failed("MPI_CHECK", expr, reason, file, line);
}

}  // namespace hone::detail
