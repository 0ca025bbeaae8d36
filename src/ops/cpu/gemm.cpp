// The fixed-order GEMM of the CPU reference ops (ops/cpu/gemm.h).
#include "ops/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

namespace hone::cpu {

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  // BLAS itself stays on one thread: the tiles are the parallelism, and their sums never depend on the threads.
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
  const int tm = (M + kGemmTileRows - 1) / kGemmTileRows, tn = (N + kGemmTileCols - 1) / kGemmTileCols;
  const int64_t tiles = int64_t(tm) * tn;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
#pragma omp parallel for schedule(dynamic, 1) if (tiles > 1 && int64_t(M) * N * std::max(K, 1) > (int64_t(1) << 18))
  for (int64_t t = 0; t < tiles; ++t) {
    const int i0 = int(t / tn) * kGemmTileRows, j0 = int(t % tn) * kGemmTileCols;
    const int m = std::min(kGemmTileRows, M - i0), n = std::min(kGemmTileCols, N - j0);
    // Row i0 of op(A): A + i0 * lda (A is M x K), or column i0 (A is K x M). Column j0 of op(B) likewise.
    const float* a = trans_a ? A + i0 : A + int64_t(i0) * lda;
    const float* b = trans_b ? B + int64_t(j0) * ldb : B + j0;
    float* c = C + int64_t(i0) * ldc + j0;
    if (K <= 0) {  // BLAS scales C by beta alone
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) c[int64_t(i) * ldc + j] = beta == 0.f ? 0.f : beta * c[int64_t(i) * ldc + j];
      continue;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, K, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace hone::cpu
