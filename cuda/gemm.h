// Row-major GEMM on bf16 operands through cuBLASLt (fp32 accumulation), the one matrix multiply of the CUDA
// engine: linear layers and the LM head call it. Plain header (CUDA headers only).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

enum class GemmOut { bf16, f32 };  // the type of D (and of C, which is D itself)

// D[M, N] = alpha * op(A) op(B) + beta * D (+ bias[N] added to every row), all matrices row-major:
//   op(A) is [M, K]: A stored [M, K] (lda >= K), or with trans_a stored [K, M] (lda >= M);
//   op(B) is [K, N]: B stored [K, N] (ldb >= N), or with trans_b stored [N, K] (ldb >= K);
//   D stored [M, N] (ldd >= N), bf16 or fp32 per d_type. beta = 0: D is only written; beta = 1: D accumulates
//   (the sum is formed in fp32 and rounded once to D's type).
// bias (bf16, length N, may be null) needs d_type == bf16. M == 0 or N == 0 does nothing; K must be > 0.
// Asynchronous on ctx.stream. The cuBLASLt descriptors and the heuristic's algorithm are cached in the context
// by shape, transposes, leading dimensions, types, epilogue and pointer alignment. Where cuBLASLt has no algorithm
// (unusual alignment), the bias is added by a kernel, and failing that the product goes through cublasGemmEx.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, const bf16* B, int ldb,
          float beta, void* D, GemmOut d_type, int ldd, const bf16* bias, const GpuContext& ctx);

// As gemm (no bias), `batch` independent products in one launch: product i reads A + i * stride_a,
// B + i * stride_b and writes D + i * stride_d (strides in elements, >= 0; 0 reuses one operand for every product).
// Two projections of one input (gate and up, k and v) run as one GEMM of twice the tiles this way: at the few
// hundred rows of a decode step one product alone fills a fraction of the SMs. Where cuBLASLt has no batched
// algorithm, the products run one by one through gemm.
void gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, int64_t stride_a,
                  const bf16* B, int ldb, int64_t stride_b, float beta, void* D, GemmOut d_type, int ldd,
                  int64_t stride_d, int batch, const GpuContext& ctx);

// As gemm (no bias), for a product whose M (without trans_a) or K (with trans_a and without trans_b) changes from
// call to call: one expert's rows of a mixture of experts. The plan is made once for that size rounded up to a power
// of two and each call sets its own sizes, so a new row count costs no heuristic query; where cuBLASLt refuses the
// bucket's algorithm for the call's sizes, the exact shape's plan runs it.
void gemm_varying(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, const bf16* B,
                  int ldb, float beta, void* D, GemmOut d_type, int ldd, const GpuContext& ctx);

// A device buffer of at least `bytes` owned by the context (256-byte aligned), for work buffers of ops built on
// GEMMs (the LM head's logits chunks). Grows on demand (synchronizing the stream first); its content is undefined
// and valid until the next call. One buffer per context: a caller must not hold it across another op using it.
void* gemm_scratch(size_t bytes, const GpuContext& ctx);

// Number of cached GEMM plans of this context (tests check that the cache is used).
size_t gemm_plan_count(const GpuContext& ctx);

}  // namespace hone::cuda
