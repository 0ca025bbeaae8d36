// TEMPORARY placeholders for the generation kernels of cuda/generation_ops.h, so that the generation engine links
// before the kernels land. Every function throws; this file is removed when the real kernels are merged.
#include "cuda/generation_ops.h"
#include "runtime/error.h"

namespace hone::cuda {
namespace {
[[noreturn]] void not_implemented(const char* what) {
  throw hone::Error(hone::cat(what, ": not implemented (placeholder until the generation kernels land)"));
}
}  // namespace

void kv_append(bf16*, bf16*, const bf16*, const bf16*, const int32_t*, int, int, int, int, const GpuContext&) {
  not_implemented("kv_append");
}
void kv_copy_blocks(bf16*, bf16*, const int32_t*, const int32_t*, int, int, int, int, const GpuContext&) {
  not_implemented("kv_copy_blocks");
}
void paged_attention_decode_forward(bf16*, const bf16*, const bf16*, const bf16*, const PagedDecodeArgs&, int, int,
                                    int, float, const GpuContext&) {
  not_implemented("paged_attention_decode_forward");
}
size_t paged_attention_decode_workspace(const PagedDecodeArgs&, int, int, const GpuContext&) {
  not_implemented("paged_attention_decode_workspace");
}
void sample_tokens(int32_t*, float*, const float*, int64_t, int, int, const GpuSamplingParams&, uint64_t, uint32_t,
                   const int32_t*, const int32_t*, const GpuContext&) {
  not_implemented("sample_tokens");
}
void check_stops(int32_t*, const int32_t*, const int32_t*, const int32_t*, const int32_t*, int, const int32_t*, int,
                 int, const GpuContext&) {
  not_implemented("check_stops");
}

}  // namespace hone::cuda
