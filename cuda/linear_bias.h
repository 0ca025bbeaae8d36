// Bias kernels of the linear layer. The gradient: dbias[OC] += column sums of dout[T, OC] (cuBLASLt's BGRAD
// epilogues overwrite their output, while hone accumulates parameter gradients). The add: out[T, OC] += bias[OC],
// used by gemm() only where cuBLASLt offers no algorithm with its bias epilogue.
#pragma once

#include "cuda/ops_cuda.h"

namespace hone::cuda {

void bias_grad_accumulate(float* dbias, const bf16* dout, int T, int OC, const GpuContext& ctx);
// out rows of stride ld (>= OC): out[t, o] = bf16(float(out[t, o]) + float(bias[o])).
void bias_add_rows(bf16* out, const bf16* bias, int T, int OC, int ld, const GpuContext& ctx);

}  // namespace hone::cuda
