// Tensor maps of bf16 matrices for the Hopper kernels (cuda/tensor_map.h), through the driver entry point.
#include "cuda/tensor_map.h"

#include "cuda/driver_api.h"
#include "runtime/error.h"

namespace hone::cuda {

namespace {
constexpr int kBoxCols = 64;
}

bool tensor_map_fits(const bf16* base, int64_t cols) {
  return cols > 0 && cols % kBoxCols == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0;
}

CUtensorMap tensor_map_bf16_2d(const bf16* base, int64_t rows, int64_t cols, int box_rows) {
  HONE_CHECK(tensor_map_fits(base, cols), "a tensor map needs a 16-byte aligned matrix of a multiple of ",
             kBoxCols, " columns, got ", cols);
  HONE_CHECK(rows > 0 && box_rows > 0 && box_rows <= 256, "bad tensor map: ", rows, " rows, boxes of ", box_rows);
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * sizeof(bf16)};
  const cuuint32_t box[2] = {cuuint32_t(kBoxCols), cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CU_CHECK(driver().tensor_map_encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                            const_cast<bf16*>(base), dims, strides, box, element_strides,
                                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

}  // namespace hone::cuda
