// choose_device: the rank -> GPU rule.
#include "runtime/device_choice.h"

#include "runtime/error.h"

namespace hone {

int choose_device(int visible_devices, int local_rank, int local_size) {
  HONE_CHECK(local_rank >= 0 && local_rank < local_size, "local rank ", local_rank, " of ", local_size);
  HONE_USER_CHECK(visible_devices > 0, "no CUDA device is visible to this rank (check CUDA_VISIBLE_DEVICES and the "
                                       "job's GPU request)");
  if (visible_devices == 1) return 0;
  HONE_USER_CHECK(local_size <= visible_devices, local_size, " ranks run on this node but it shows ",
                  visible_devices, " GPUs: start one rank per GPU (e.g. mpirun -np ", visible_devices,
                  " or srun --ntasks-per-node=", visible_devices, "), or give each rank its own GPU");
  return local_rank;
}

}  // namespace hone
