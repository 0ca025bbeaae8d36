// Token embedding lookup (fp32 CPU reference): a row gather forward, a row scatter-add backward.
#include <cstring>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

void embedding_forward(float* out, const int32_t* ids, const float* wte, int T, int C) {
#pragma omp parallel for if (int64_t(T) * C > 65536)
  for (int t = 0; t < T; ++t) {
    HONE_CHECK(ids[t] >= 0, "negative token id ", ids[t], " at row ", t);
    std::memcpy(out + int64_t(t) * C, wte + int64_t(ids[t]) * C, sizeof(float) * size_t(C));
  }
}

// Serial over rows: two rows with the same token add into the same dwte row.
void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int T, int C) {
  for (int t = 0; t < T; ++t) {
    HONE_CHECK(ids[t] >= 0, "negative token id ", ids[t], " at row ", t);
    float* d = dwte + int64_t(ids[t]) * C;
    const float* g = dout + int64_t(t) * C;
    for (int c = 0; c < C; ++c) d[c] += g[c];
  }
}

void embedding_slice_forward(float* out, const int32_t* ids, const float* wte, int T, int C, int vocab_begin, int V) {
#pragma omp parallel for if (int64_t(T) * C > 65536)
  for (int t = 0; t < T; ++t) {
    HONE_CHECK(ids[t] >= 0, "negative token id ", ids[t], " at row ", t);
    const int64_t row = int64_t(ids[t]) - vocab_begin;
    float* o = out + int64_t(t) * C;
    if (row >= 0 && row < V) std::memcpy(o, wte + row * C, sizeof(float) * size_t(C));
    else std::memset(o, 0, sizeof(float) * size_t(C));
  }
}

void embedding_slice_backward(float* dwte, const float* dout, const int32_t* ids, int T, int C, int vocab_begin,
                              int V) {
  for (int t = 0; t < T; ++t) {
    HONE_CHECK(ids[t] >= 0, "negative token id ", ids[t], " at row ", t);
    const int64_t row = int64_t(ids[t]) - vocab_begin;
    if (row < 0 || row >= V) continue;
    float* d = dwte + row * C;
    const float* g = dout + int64_t(t) * C;
    for (int c = 0; c < C; ++c) d[c] += g[c];
  }
}

}  // namespace hone::cpu
