// Which GPU a rank uses, from what it sees: one rank per GPU, chosen by the rank's place on its node.
//   1 visible device (CUDA_VISIBLE_DEVICES set per rank, or Slurm's per-task GPU binding): device 0;
//   N visible devices and L ranks on the node, L <= N: device local_rank;
//   L > N > 1: a UserError saying to start one rank per GPU; no device: a UserError.
// Pure arithmetic (backend/gpu_device_select.h applies it and logs the mapping).
#pragma once

namespace hone {

int choose_device(int visible_devices, int local_rank, int local_size);

}  // namespace hone
