// Selects this rank's GPU (runtime/device_choice.h's rule from the visible device count and the node-local rank),
// makes it current, and logs every rank's mapping at info level (host, rank, local rank, device, PCI bus id),
// warning when two ranks of a node share a GPU. Collective over MPI_COMM_WORLD when MPI is running.
#pragma once

#if HONE_CUDA

#include <string>

namespace hone {

struct DeviceChoice {
  int device = 0;
  std::string pci_bus_id;  // e.g. "0000:18:00.0"
};

DeviceChoice select_rank_device();

// The CUDA devices this process sees. No device, or no usable driver (none installed, too old, a stub library, a
// mismatched kernel module), is a UserError of one line naming the CUDA error: the machine is the user's to fix, not
// an internal failure. `who` begins the message ("hone bench", "hone logprobs --device cuda").
int usable_cuda_devices(const char* who);

}  // namespace hone

#endif  // HONE_CUDA
