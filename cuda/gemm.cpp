// cuBLASLt behind hone's row-major gemm() (cuda/gemm.h), with a per-context cache of matmul plans.
//
// Row-major to column-major: cuBLASLt is column-major, and a row-major [R, C] matrix with row stride ld has exactly
// the bytes of a column-major [C, R] matrix with leading dimension ld, i.e. of its transpose. So the row-major
// product D = op(A) op(B) is, read column-major, D^T = op(B)^T op(A)^T: we hand cuBLASLt our B as its "A" and our A
// as its "B", with m = N, n = M, k = K:
//   cuBLASLt A := our B. Without trans_b, B is row-major [K, N] = column-major [N, K] (ld ldb), already op(B)^T:
//                 op N. With trans_b, B is row-major [N, K] = column-major [K, N] (ld ldb) = op(B): op T.
//   cuBLASLt B := our A. Without trans_a, A is row-major [M, K] = column-major [K, M] (ld lda) = op(A)^T: op N.
//                 With trans_a, A is row-major [K, M] = column-major [M, K] (ld lda): op T.
//   D (and C = D): row-major [M, N] = column-major [N, M], ld ldd.
// So cuBLASLt's transa is our trans_b and its transb is our trans_a. The bias epilogue adds a vector of D's
// column-major row count (N): one value per column of our row-major D, as a linear layer's bias.
#include "cuda/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>

#include "cuda/check.h"
#include "cuda/gpu_context_impl.h"
#include "cuda/linear_bias.h"

namespace hone::cuda {

namespace {

// Everything the heuristic's choice depends on. Pointer alignment is part of it: an algorithm chosen for 256-byte
// aligned operands may not run on an operand that starts inside a row (the LM head's chunk of W).
struct PlanKey {
  bool trans_a, trans_b;
  int M, N, K, lda, ldb, ldd;
  int d_type;
  bool bias;
  int align_a, align_b, align_d, align_bias;
  bool varying = false;  // gemm_varying's: M and K are buckets, the call sets its own sizes
  int batch = 1;         // gemm_batched's product count and element strides (0 for a single product)
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  auto operator<=>(const PlanKey&) const = default;
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // in cuBLASLt's naming (a = our B, b = our A)
  cublasLtMatmulAlgo_t algo{};
  bool use_lt = true;           // false: cublasGemmEx (cuBLASLt had no algorithm)
  bool bias_by_kernel = false;  // the bias is added by bias_add_rows after the GEMM
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

constexpr size_t kMaxPlans = 8192;

struct GemmState {
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  cublasHandle_t cublas = nullptr;  // created only for the fallback
  GemmState() = default;
  GemmState(const GemmState&) = delete;
  GemmState& operator=(const GemmState&) = delete;
  ~GemmState() {
    if (scratch) cudaFree(scratch);
    if (cublas) cublasDestroy(cublas);
  }
};

GemmState& state_of(const GpuContext& ctx) {
  HONE_CHECK(ctx.impl != nullptr, "GEMM on a GpuContext that was not created");
  auto& slot = ctx.impl->gemm_state;
  if (!slot) slot = std::make_shared<GemmState>();
  return *static_cast<GemmState*>(slot.get());
}

// The largest power of two (up to 256) dividing the address: what cuBLASLt may assume about an operand.
int alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int al = 256;
  while (al > 1 && a % uintptr_t(al) != 0) al /= 2;
  return al;
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

// Descriptors and the heuristic's best algorithm; false when cuBLASLt offers none for this problem.
bool try_lt_plan(Plan& plan, const PlanKey& k, bool bias_epilogue, const bf16* bias, const GpuContext& ctx) {
  const cudaDataType_t d_type = k.d_type == int(GemmOut::f32) ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
  const cublasOperation_t op_b = k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is our A
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  if (bias_epilogue) {
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_16BF));
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
  }
  // Column-major layouts (rows, cols, ld) as derived at the top of this file.
  if (k.trans_b)
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, uint64_t(k.K), uint64_t(k.N), k.ldb));
  else
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, uint64_t(k.N), uint64_t(k.K), k.ldb));
  if (k.trans_a)
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, uint64_t(k.M), uint64_t(k.K), k.lda));
  else
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, uint64_t(k.K), uint64_t(k.M), k.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, d_type, uint64_t(k.N), uint64_t(k.M), k.ldd));
  if (k.batch > 1) {
    auto batched = [&](cublasLtMatrixLayout_t l, int64_t stride) {
      const int32_t count = k.batch;
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    };
    batched(plan.a, k.stride_b);  // cuBLASLt's A is our B
    batched(plan.b, k.stride_a);
    batched(plan.d, k.stride_d);
  }

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(ctx.impl->workspace_bytes));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(k.align_b));  // cuBLASLt's A is our B
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(k.align_a));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(k.align_d));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(k.align_d));
    // A failed query (NOT_SUPPORTED: no algorithm for this configuration) is answered by the fallback in
    // make_plan; cublasGemmEx reports the problem itself if it is truly invalid.
    status = cublasLtMatmulAlgoGetHeuristic(ctx.impl->cublaslt, plan.desc, plan.a, plan.b, plan.d, plan.d, pref, 1,
                                            &result, &found);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS) return false;
  plan.algo = result.algo;
  return true;
}

// cuBLASLt with the bias epilogue if it has an algorithm; else cuBLASLt without it and a bias kernel; else
// cublasGemmEx (any alignment) and the bias kernel.
std::unique_ptr<Plan> make_plan(const PlanKey& k, const bf16* bias, const GpuContext& ctx) {
  auto plan = std::make_unique<Plan>();
  if (try_lt_plan(*plan, k, k.bias, bias, ctx)) return plan;
  if (k.bias) {
    plan = std::make_unique<Plan>();
    plan->bias_by_kernel = true;
    if (try_lt_plan(*plan, k, false, nullptr, ctx)) return plan;
  }
  plan = std::make_unique<Plan>();
  plan->use_lt = false;
  plan->bias_by_kernel = k.bias;
  return plan;
}

// The cached plan for key, made on first use. The experts' GEMMs of a mixture of experts take a new row count almost
// every pass: the cache starts over past a bound rather than grow with the run (a plan only shapes the next enqueue,
// so dropping them is safe).
Plan& plan_for(GemmState& st, const PlanKey& key, const bf16* bias, const GpuContext& ctx) {
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    if (st.plans.size() >= kMaxPlans) st.plans.clear();
    it = st.plans.emplace(key, make_plan(key, bias, ctx)).first;
  }
  return *it->second;
}

// The arguments every entry point checks; false when the product is empty (M or N is 0: nothing to do).
bool check_gemm(bool trans_a, bool trans_b, int M, int N, int K, const bf16* A, int lda, const bf16* B, int ldb,
                const void* D, int ldd) {
  HONE_CHECK(M >= 0 && N >= 0 && K > 0, "bad GEMM shape M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return false;
  HONE_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldd >= N, "bad GEMM leading dimensions lda=",
             lda, " ldb=", ldb, " ldd=", ldd, " for M=", M, " N=", N, " K=", K);
  HONE_CHECK(A && B && D, "GEMM with a null operand");
  return true;
}

cublasHandle_t cublas_handle(GemmState& st, const GpuContext& ctx) {
  if (!st.cublas) {
    CUBLAS_CHECK(cublasCreate(&st.cublas));
    CUBLAS_CHECK(cublasSetStream(st.cublas, ctx.stream));
    CUBLAS_CHECK(cublasSetWorkspace(st.cublas, ctx.impl->workspace, ctx.impl->workspace_bytes));
  }
  return st.cublas;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, const bf16* B, int ldb,
          float beta, void* D, GemmOut d_type, int ldd, const bf16* bias, const GpuContext& ctx) {
  if (!check_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, D, ldd)) return;
  HONE_CHECK(!bias || d_type == GemmOut::bf16, "the GEMM bias epilogue is for bf16 outputs");
  GemmState& st = state_of(ctx);
  const PlanKey key{trans_a,          trans_b,          M,
                    N,                K,                lda,
                    ldb,              ldd,              int(d_type),
                    bias != nullptr,  alignment_of(A),  alignment_of(B),
                    alignment_of(D),  bias ? alignment_of(bias) : 0, false};
  Plan& plan = plan_for(st, key, bias, ctx);
  if (plan.use_lt) {
    if (bias && !plan.bias_by_kernel)
      set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    CUBLAS_CHECK(cublasLtMatmul(ctx.impl->cublaslt, plan.desc, &alpha, B, plan.a, A, plan.b, &beta, D, plan.d, D,
                                plan.d, &plan.algo, ctx.impl->workspace, ctx.impl->workspace_bytes, ctx.stream));
  } else {
    const cudaDataType_t d_cuda_type = d_type == GemmOut::f32 ? CUDA_R_32F : CUDA_R_16BF;
    CUBLAS_CHECK(cublasGemmEx(cublas_handle(st, ctx), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A,
                              CUDA_R_16BF, lda, &beta, D, d_cuda_type, ldd, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  if (plan.bias_by_kernel) bias_add_rows(static_cast<bf16*>(D), bias, M, N, ldd, ctx);
}

void gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, int64_t stride_a,
                  const bf16* B, int ldb, int64_t stride_b, float beta, void* D, GemmOut d_type, int ldd,
                  int64_t stride_d, int batch, const GpuContext& ctx) {
  HONE_CHECK(batch >= 1 && stride_a >= 0 && stride_b >= 0 && stride_d >= 0, "bad batched GEMM: batch=", batch,
             " strides ", stride_a, ", ", stride_b, ", ", stride_d);
  const size_t d_size = d_type == GemmOut::f32 ? sizeof(float) : sizeof(bf16);
  auto d_at = [&](int i) { return static_cast<void*>(static_cast<char*>(D) + size_t(i) * size_t(stride_d) * d_size); };
  if (batch == 1) {
    gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, D, d_type, ldd, nullptr, ctx);
    return;
  }
  if (!check_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, D, ldd)) return;
  // Every product's operands must meet the alignment the plan is chosen for: the smallest over the first and the
  // second product's addresses (the strides repeat from there).
  const int align_a = std::min(alignment_of(A), alignment_of(A + stride_a));
  const int align_b = std::min(alignment_of(B), alignment_of(B + stride_b));
  const int align_d = std::min(alignment_of(D), alignment_of(d_at(1)));
  GemmState& st = state_of(ctx);
  PlanKey key{trans_a, trans_b, M, N, K, lda, ldb, ldd, int(d_type), false, align_a, align_b, align_d, 0, false};
  key.batch = batch;
  key.stride_a = stride_a;
  key.stride_b = stride_b;
  key.stride_d = stride_d;
  Plan& plan = plan_for(st, key, nullptr, ctx);
  if (plan.use_lt) {
    CUBLAS_CHECK(cublasLtMatmul(ctx.impl->cublaslt, plan.desc, &alpha, B, plan.a, A, plan.b, &beta, D, plan.d, D,
                                plan.d, &plan.algo, ctx.impl->workspace, ctx.impl->workspace_bytes, ctx.stream));
    return;
  }
  for (int i = 0; i < batch; ++i)  // no batched algorithm: one product at a time
    gemm(trans_a, trans_b, M, N, K, alpha, A + int64_t(i) * stride_a, lda, B + int64_t(i) * stride_b, ldb, beta,
         d_at(i), d_type, ldd, nullptr, ctx);
}

void* gemm_scratch(size_t bytes, const GpuContext& ctx) {
  GemmState& st = state_of(ctx);
  if (bytes > st.scratch_bytes) {
    if (st.scratch) {
      CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // the old buffer may still be read by queued work
      CUDA_CHECK(cudaFree(st.scratch));
      st.scratch = nullptr;
      st.scratch_bytes = 0;
    }
    CUDA_CHECK(cudaMalloc(&st.scratch, bytes));
    st.scratch_bytes = bytes;
  }
  return st.scratch;
}

namespace {

// The sizes of the three layouts (as try_lt_plan creates them) set to M, N, K.
void set_layout_sizes(Plan& plan, bool trans_a, bool trans_b, int M, int N, int K) {
  auto set = [](cublasLtMatrixLayout_t l, int64_t rows, int64_t cols) {
    const uint64_t r = uint64_t(rows), c = uint64_t(cols);
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof(r)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof(c)));
  };
  if (trans_b) set(plan.a, K, N);
  else set(plan.a, N, K);
  if (trans_a) set(plan.b, M, K);
  else set(plan.b, K, M);
  set(plan.d, N, M);
}

int bucket(int n) {
  int b = 64;
  while (b < n) b *= 2;
  return b;
}

}  // namespace

size_t gemm_plan_count(const GpuContext& ctx) { return state_of(ctx).plans.size(); }

void gemm_varying(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, const bf16* B,
                  int ldb, float beta, void* D, GemmOut d_type, int ldd, const GpuContext& ctx) {
  if (!check_gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, D, ldd)) return;
  // Only a size that is a layout's column count is rounded up: a row count is bounded by its leading dimension.
  const int Mb = trans_a ? M : bucket(M), Kb = (trans_a && !trans_b) ? bucket(K) : K;
  GemmState& st = state_of(ctx);
  const PlanKey key{trans_a, trans_b, Mb, N, Kb, lda, ldb, ldd, int(d_type), false, alignment_of(A), alignment_of(B),
                    alignment_of(D), 0, true};
  Plan& plan = plan_for(st, key, nullptr, ctx);
  if (plan.use_lt) {
    set_layout_sizes(plan, trans_a, trans_b, M, N, K);
    const cublasStatus_t status =
        cublasLtMatmul(ctx.impl->cublaslt, plan.desc, &alpha, B, plan.a, A, plan.b, &beta, D, plan.d, D, plan.d,
                       &plan.algo, ctx.impl->workspace, ctx.impl->workspace_bytes, ctx.stream);
    if (status == CUBLAS_STATUS_SUCCESS) return;
    // The bucket's algorithm refused this call's sizes (nothing was enqueued): the exact shape's plan instead.
  }
  gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, D, d_type, ldd, nullptr, ctx);
}

}  // namespace hone::cuda
