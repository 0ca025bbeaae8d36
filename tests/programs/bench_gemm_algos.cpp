// How far cuBLASLt's first heuristic choice is from the fastest of its candidates at the GEMM shapes of the
// engine's layers (decode at 32, 64 and 512 rows; training micro-batches of 16,384 rows, forward and both
// backward products), for Qwen3-0.6B and Llama-3.2-1B. For each shape: the heuristic's first algorithm, the
// fastest of up to 16 it returns (each timed with events after warm-up, median of 15), and the ratio. Row-major
// shapes as cuda/gemm.h: D[M, N] = op(A) op(B); a linear layer's forward is A = X [M, K], B = W [N, K] transposed.
// With --tail: only the long tail's decode shapes (Qwen3-1.7B at 8 to 128 rows, the LM head included), every
// candidate also with K splits of 2 to 16 and each reduction scheme it supports.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "tests/programs/gpu_bench_main.h"

namespace {

struct Shape {
  std::string name;
  bool trans_a, trans_b;
  int M, N, K;
};

// Median of 15 timed calls of one algorithm (3 warm-up calls); negative if the algorithm fails to run.
float time_algo(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* d,
                void* ws, size_t ws_bytes, cudaStream_t stream) {
  const float one = 1.0f, zero = 0.0f;
  auto call = [&] {
    return cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &algo, ws, ws_bytes, stream);
  };
  for (int i = 0; i < 3; ++i)
    if (call() != CUBLAS_STATUS_SUCCESS) return -1.0f;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) {
    CUDA_CHECK(cudaEventRecord(e0, stream));
    call();
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void bench_shape(cublasLtHandle_t lt, const Shape& s, void* a, void* b, void* d, void* ws, size_t ws_bytes,
                 cudaStream_t stream, bool split_k = false) {
  // Column-major view (cuda/gemm.cpp): cuBLASLt's A is our B, its B our A, m = N, n = M.
  cublasLtMatmulDesc_t desc;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  const int ldb = s.trans_b ? s.K : s.N, lda = s.trans_a ? s.M : s.K;
  cublasLtMatrixLayout_t la, lb, ld;
  if (s.trans_b)
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.K, s.N, ldb));
  else
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.N, s.K, ldb));
  if (s.trans_a)
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.M, s.K, lda));
  else
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.K, s.M, lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, s.N, s.M, s.N));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t wsb = ws_bytes;
  CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
  cublasLtMatmulHeuristicResult_t res[16];
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 16, res, &found));
  float first = -1, best = -1;
  int best_i = -1, best_split = 1;
  uint32_t best_scheme = 0;
  for (int i = 0; i < found; ++i) {
    const float t = time_algo(lt, desc, la, lb, ld, res[i].algo, b, a, d, ws, ws_bytes, stream);
    if (i == 0) first = t;
    if (t > 0 && (best < 0 || t < best)) best = t, best_i = i;
    if (!split_k) continue;
    // The same algorithm with its K split: few rows leave most SMs idle and each CTA a long K loop.
    int32_t can = 0;
    uint32_t schemes = 0;
    size_t written = 0;
    cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &can, sizeof(can), &written);
    cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                      sizeof(schemes), &written);
    if (!can) continue;
    for (int32_t split : {2, 3, 4, 6, 8, 12, 16}) {
      for (uint32_t scheme : {uint32_t(CUBLASLT_REDUCTION_SCHEME_INPLACE),
                              uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                              uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)}) {
        if (!(schemes & scheme)) continue;
        cublasLtMatmulAlgo_t algo = res[i].algo;
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof(split));
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme));
        cublasLtMatmulHeuristicResult_t chk{};
        if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, ld, ld, &algo, &chk) != CUBLAS_STATUS_SUCCESS ||
            chk.workspaceSize > ws_bytes)
          continue;
        const float ts = time_algo(lt, desc, la, lb, ld, algo, b, a, d, ws, ws_bytes, stream);
        if (ts > 0 && ts < best) best = ts, best_i = i, best_split = split, best_scheme = scheme;
      }
    }
  }
  const double flop = 2.0 * s.M * s.N * s.K;
  std::printf("%-34s %6d %6d %6d %3d  %9.2f us %7.1f TF/s  best #%-2d %9.2f us %7.1f TF/s  x%.3f", s.name.c_str(),
              s.M, s.N, s.K, found, first * 1e3, flop / (first * 1e-3) / 1e12, best_i, best * 1e3,
              flop / (best * 1e-3) / 1e12, first / best);
  if (split_k)
    std::printf("  split %d scheme %u  %.0f GB/s of W", best_split, best_scheme,
                2.0 * s.N * s.K / (best * 1e-3) / 1e9);
  std::printf("\n");
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
}

struct Model {
  const char* name;
  int hidden, q, kv, inter, vocab;
};

}  // namespace

int main(int argc, char** argv) {
  const bool tail_only = argc > 1 && std::string(argv[1]) == "--tail";  // only the long tail's few-row shapes
  return test::run_gpu_bench("bench_gemm_algos", [tail_only](const hone::cuda::GpuContext& ctx) {
    (void)ctx;
    cublasLtHandle_t lt;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    const size_t ws_bytes = size_t(64) << 20, elems = size_t(16384) * 152000;
    void *a, *b, *d, *ws;
    CUDA_CHECK(cudaMalloc(&a, elems * 2));
    CUDA_CHECK(cudaMalloc(&b, size_t(16384) * 8192 * 2));
    CUDA_CHECK(cudaMalloc(&d, elems * 2));
    CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
    CUDA_CHECK(cudaMemset(a, 0, elems * 2));
    CUDA_CHECK(cudaMemset(b, 0, size_t(16384) * 8192 * 2));
    std::printf("%-34s %6s %6s %6s %3s  %24s  %33s\n", "shape", "M", "N", "K", "n", "heuristic's first",
                "fastest candidate");
    const Model models[] = {{"qwen3-0.6b", 1024, 2048, 1024, 3072, 151936},
                            {"llama-3.2-1b", 2048, 2048, 512, 8192, 128256}};
    for (const Model& m : models) {
      if (tail_only) break;
      std::vector<Shape> shapes;
      const int H = m.hidden;
      const std::pair<const char*, std::pair<int, int>> linears[] = {
          {"q", {m.q, H}}, {"k/v", {m.kv, H}}, {"o", {H, m.q}}, {"gate/up", {m.inter, H}}, {"down", {H, m.inter}}};
      for (int rows : {32, 64, 512})
        for (auto& [n, nk] : linears)
          shapes.push_back({std::string(m.name) + " decode " + n, false, true, rows, nk.first, nk.second});
      for (auto& [n, nk] : linears) {
        const int M = 16384, N = nk.first, K = nk.second;
        shapes.push_back({std::string(m.name) + " fwd " + n, false, true, M, N, K});
        shapes.push_back({std::string(m.name) + " dX " + n, false, false, M, K, N});
        shapes.push_back({std::string(m.name) + " dW " + n, true, false, N, K, M});
      }
      shapes.push_back({std::string(m.name) + " lm_head chunk", false, true, 8192, 8192, H});
      for (const Shape& s : shapes) bench_shape(lt, s, a, b, d, ws, ws_bytes, stream);
    }
    // The long tail's decode steps: a few rows at the Qwen3-1.7B shape, every candidate also with its K split.
    const Model tail{"qwen3-1.7b", 2048, 2048, 1024, 6144, 151936};
    for (int rows : {8, 32, 64, 128}) {
      const int H = tail.hidden;
      const std::pair<const char*, std::pair<int, int>> linears[] = {{"q", {tail.q, H}}, {"k/v", {tail.kv, H}},
          {"o", {H, tail.q}}, {"gate/up", {tail.inter, H}}, {"down", {H, tail.inter}}, {"lm_head", {tail.vocab, H}}};
      for (auto& [n, nk] : linears)
        bench_shape(lt, {std::string("qwen3-1.7b decode ") + n, false, true, rows, nk.first, nk.second}, a, b, d, ws,
                    ws_bytes, stream, true);
    }
    cudaFree(ws);
    cudaFree(d);
    cudaFree(b);
    cudaFree(a);
    cudaStreamDestroy(stream);
    cublasLtDestroy(lt);
  });
}
