// The CPU reference ops' one GEMM (row-major sgemm, BLAS's arguments), in an order of operations that does not
// depend on the thread count: C is cut into fixed tiles (kGemmTileRows x kGemmTileCols, set by the shape alone),
// each computed whole by single-threaded OpenBLAS on one OpenMP thread. OpenBLAS's own threading splits a product by
// the thread count, which changes the kernels and blockings it picks and so the rounding: a run at 1, 2 or 4
// threads would not write the same numbers. Plain header.
#pragma once

#include <cstdint>

namespace hone::cpu {

constexpr int kGemmTileRows = 128;
constexpr int kGemmTileCols = 256;

// C[M x N] = alpha * op(A)[M x K] * op(B)[K x N] + beta * C, row-major; op(X) = X^T when trans_x.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc);

}  // namespace hone::cpu
