// Selective activation recompute of the CPU decoder layer (model/recompute.h has the choices): the kept activations
// carved per layer, the recomputed ones in the scratch shared by the layers, and the rerun of the elementwise ops
// before the layer's backward.
#pragma once

#include <cstdint>

#include "model/recompute.h"
#include "model/transformer_layer.h"

namespace hone {

// Selective recompute on the CPU. carve_selective_activations points a at the shared scratch for the recomputed
// activations (h1/h1_local, q_n, k_n, q_r, k_r, h2/h2_local, act) and carves the kept ones from `base` (as
// carve_layer_activations; base == nullptr only counts) for T tokens, local_rows of them this rank's residual rows.
int64_t carve_selective_activations(LayerActivations& a, float* base, const LayerActivations& scratch,
                                    const LayerShape& s, int T, int local_rows = -1);
// Reruns the elementwise ops of layer_forward from the kept activations (a.x_in and the kept ones), bitwise the
// same values, before layer_backward reads them. Under sequence parallelism the normed rows are recomputed on this
// rank's rows (layer_backward gathers them again itself).
void recompute_selective_activations(const LayerShape& s, const LayerWeights& w, const LayerBatch& b,
                                     const LayerActivations& a, int local_rows);

}  // namespace hone
