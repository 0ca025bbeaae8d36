// Selective activation recompute of the decoder layer (model/recompute.h has the choices), over a backend: the kept
// activations carved per layer, the recomputed ones in the scratch shared by the layers, and the rerun of the
// elementwise ops before the layer's backward.
#pragma once

#include <cstddef>

#include "model/recompute.h"
#include "model/transformer_layer.h"

namespace hone {

// Points a at `scratch` for the recomputed activations (h1/h1_local, q_r, k_r, h2/h2_local, act) and carves the kept
// ones from base (as carve_layer_activations; base == nullptr only counts) for T tokens, local_rows of them this
// rank's residual rows; returns their bytes.
template <typename B>
size_t carve_selective_activations(LayerActivations<B>& a, char* base, const LayerActivations<B>& scratch,
                                   const LayerShape& s, int T, int local_rows = -1);
// Reruns the elementwise ops of layer_forward from a.x_in and the kept activations, the same values, before
// layer_backward reads them. Under sequence parallelism the normed rows are recomputed on this rank's rows
// (layer_backward gathers them again itself).
template <typename B>
void recompute_selective_activations(const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerBatch& b,
                                     const LayerActivations<B>& a, int local_rows, const typename B::Exec& x);

}  // namespace hone
