// The memory regions and decode steps of each backend's generation (B::GenerationRegion, B::DecodeSteps): plain host
// buffers and eager steps on the CPU (host_generation_memory.h), virtual device memory and CUDA graphs on the GPU
// (cuda_generation_memory.h).
#pragma once

#include "backend/backend.h"
#include "backend/cuda_generation_memory.h"
#include "backend/host_generation_memory.h"
