// Selective activation recompute of the GPU decoder layer (model/recompute.h has the choices), the twin of
// model/layer_recompute.h: the kept activations carved per layer, the recomputed ones in the scratch shared by the
// layers, and the rerun of the elementwise ops before the layer's backward.
#pragma once

#if HONE_CUDA

#include <cstddef>

#include "model/gpu_transformer_layer.h"
#include "model/recompute.h"

namespace hone {

// Points a at `scratch` for the recomputed activations (h1, q_r, k_r, h2, act) and carves the kept ones
// from base (256-byte aligned regions; base == nullptr only counts) for T tokens; returns their bytes.
size_t carve_gpu_selective_activations(GpuLayerActivations& a, char* base, const GpuLayerActivations& scratch,
                                       const LayerShape& s, int T);
// Reruns the elementwise ops of gpu_layer_forward from a.x_in and the kept activations, on ctx's stream.
void recompute_gpu_selective_activations(const LayerShape& s, const GpuLayerParams<const bf16>& w,
                                         const GpuLayerBatch& b, const GpuLayerActivations& a,
                                         const cuda::GpuContext& ctx);

}  // namespace hone

#endif  // HONE_CUDA
