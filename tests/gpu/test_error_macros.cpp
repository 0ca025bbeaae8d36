// CUDA_CHECK, CUDA_CHECK_LAST, CUBLAS_CHECK, CUDNN_CHECK and NCCL_CHECK messages (cuda/check.h). These need no GPU:
// a call that fails without a device, or a failing status literal.
#include <boost/test/unit_test.hpp>

#include <string>

#if HONE_CUDA
#include "cuda/check.h"

std::string cuda_check_last_after_bad_launch(int* line);  // tests/gpu/test_error_macros_nvcc.cu

namespace {
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const hone::Error& e) {
    return e.what();
  }
  return "no exception";
}
std::string at(int line) { return " at " + std::string(__FILE__) + ":" + std::to_string(line); }
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(error_macros_gpu)

BOOST_AUTO_TEST_CASE(cuda_check_names_call_status_file_and_line) {
  int line = 0;
  const std::string msg = error_of([&] {
    line = __LINE__ + 1;
    CUDA_CHECK(cudaSetDevice(-1));
  });
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(msg.find("CUDA_CHECK(cudaSetDevice(-1)) failed: ") == 0u);
  BOOST_TEST(msg.find("(cudaError") != std::string::npos);  // the status name, e.g. (cudaErrorInvalidDevice)
  BOOST_TEST(ends_with(msg, at(line)));
  cudaGetLastError();
}

BOOST_AUTO_TEST_CASE(cuda_check_with_a_status_literal) {
  int line = 0;
  const std::string msg = error_of([&] {
    line = __LINE__ + 1;
    CUDA_CHECK(cudaErrorMemoryAllocation);
  });
  BOOST_TEST(msg == "CUDA_CHECK(cudaErrorMemoryAllocation) failed: out of memory (cudaErrorMemoryAllocation)" + at(line));
  BOOST_CHECK_NO_THROW(CUDA_CHECK(cudaSuccess));
}

BOOST_AUTO_TEST_CASE(cuda_check_last_compiles_under_nvcc_and_reports_a_bad_launch) {
  int line = 0;
  const std::string msg = cuda_check_last_after_bad_launch(&line);
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(msg.find("CUDA_CHECK_LAST() failed: ") == 0u);
  BOOST_TEST(msg.find("(cudaError") != std::string::npos);
  BOOST_TEST(ends_with(msg, "test_error_macros_nvcc.cu:" + std::to_string(line)));
}

BOOST_AUTO_TEST_CASE(cublas_check_names_the_status) {
  int line = 0;
  const std::string msg = error_of([&] {
    line = __LINE__ + 1;
    CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED);
  });
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(msg.find("CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED) failed: ") == 0u);
  BOOST_TEST(msg.find("(CUBLAS_STATUS_NOT_INITIALIZED)") != std::string::npos);
  BOOST_TEST(ends_with(msg, at(line)));
  BOOST_CHECK_NO_THROW(CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

BOOST_AUTO_TEST_CASE(cudnn_check_names_the_status) {
  int line = 0;
  const std::string msg = error_of([&] {
    line = __LINE__ + 1;
    CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM);
  });
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(msg.find("CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM) failed: CUDNN_STATUS_BAD_PARAM") == 0u);
  BOOST_TEST(ends_with(msg, at(line)));
}

BOOST_AUTO_TEST_CASE(nccl_check_names_the_status) {
  int line = 0;
  const std::string msg = error_of([&] {
    line = __LINE__ + 1;
    NCCL_CHECK(ncclInvalidArgument);
  });
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(msg.find("NCCL_CHECK(ncclInvalidArgument) failed: ") == 0u);
  BOOST_TEST(msg.find("(ncclInvalidArgument)") != std::string::npos);
  BOOST_TEST(ends_with(msg, at(line)));
  BOOST_CHECK_NO_THROW(NCCL_CHECK(ncclSuccess));
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
