// Comm's shared helpers.
#include "comm/comm.h"

#include "runtime/error.h"
#include "runtime/runtime.h"

namespace hone {

std::string Comm::describe() const {
  return cat(name(), " group (world ranks ", detail::rank_ranges(world_ranks()), ")");
}

}  // namespace hone
