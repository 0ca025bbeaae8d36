// The part of the model one forward and backward runs: a pipeline chunk (parallel/pipeline_layout.h) is layers
// [layer_begin, layer_end), with the embedding at its entry when it is the first chunk (otherwise it takes the
// previous chunk's hidden state) and the final norm and LM head at its exit when it is the last (otherwise it hands
// its hidden state on). The default is the whole model. The CPU Transformer and the GpuTransformer take one; the
// layer body never sees it. Plain header: .cu-safe.
#pragma once

namespace hone {

struct ModelSpan {
  int layer_begin = 0;
  int layer_end = -1;  // -1: through the last layer
  bool embedding = true;
  bool head = true;

  // The span with layer_end resolved against a model of num_layers layers.
  ModelSpan resolved(int num_layers) const {
    ModelSpan s = *this;
    if (s.layer_end < 0) s.layer_end = num_layers;
    return s;
  }
  bool whole(int num_layers) const {
    const ModelSpan s = resolved(num_layers);
    return s.layer_begin == 0 && s.layer_end == num_layers && s.embedding && s.head;
  }
};

}  // namespace hone
