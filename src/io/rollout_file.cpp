// One step's rollouts in a compressed HDF5 file (see rollout_file.h).
#include "io/rollout_file.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "io/atomic_file.h"
#include "io/output_hdf5.h"
#include "runtime/error.h"

namespace hone {

namespace {

using h5out::check;
using h5out::Handle;

// A chunked, compressed 1-D dataset of v (at least one element per chunk, even when v is empty).
template <typename T>
void write_compressed(hid_t loc, const std::string& name, const std::vector<T>& v, hid_t file_type, hid_t mem_type) {
  const hsize_t n = v.size();
  hsize_t dims[1] = {n};
  Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, "H5Screate_simple");
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate(dataset)");
  // About 1 MiB per chunk: large enough for deflate to find the repeats (a group's G copies of one prompt).
  const hsize_t per_chunk = std::max<hsize_t>(1, (hsize_t(1) << 20) / sizeof(T));
  hsize_t chunk[1] = {std::clamp<hsize_t>(n, 1, per_chunk)};
  check(H5Pset_chunk(dcpl, 1, chunk), "H5Pset_chunk");
  if (sizeof(T) > 1) check(H5Pset_shuffle(dcpl), "H5Pset_shuffle");
  check(H5Pset_deflate(dcpl, 4), "H5Pset_deflate");
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose, "H5Pcreate(link)");
  check(H5Pset_create_intermediate_group(lcpl, 1), "H5Pset_create_intermediate_group");
  Handle d(H5Dcreate2(loc, name.c_str(), file_type, space, lcpl, dcpl, H5P_DEFAULT), H5Dclose, "H5Dcreate2");
  if (n > 0) check(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "H5Dwrite");
}

void write_i64(hid_t f, const std::string& name, const std::vector<int64_t>& v) {
  write_compressed(f, name, v, H5T_STD_I64LE, H5T_NATIVE_INT64);
}
void write_f64(hid_t f, const std::string& name, const std::vector<double>& v) {
  write_compressed(f, name, v, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
}
void write_i8(hid_t f, const std::string& name, const std::vector<int8_t>& v) {
  write_compressed(f, name, v, H5T_STD_I8LE, H5T_NATIVE_INT8);
}

// Ragged text: the rows' bytes concatenated, and N+1 offsets.
void write_text(hid_t f, const std::string& name, const std::vector<const std::string*>& rows) {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> offsets = {0};
  size_t total = 0;
  for (const std::string* s : rows) total += s->size();
  bytes.reserve(total);
  for (const std::string* s : rows) {
    bytes.insert(bytes.end(), s->begin(), s->end());
    offsets.push_back(int64_t(bytes.size()));
  }
  write_compressed(f, name + "_bytes", bytes, H5T_STD_U8LE, H5T_NATIVE_UINT8);
  write_i64(f, name + "_offsets", offsets);
}

}  // namespace

std::string rollout_folder_name(const std::string& run_name) { return run_name + ".rollouts"; }

std::string rollout_file_name(int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "step_%08lld.h5", static_cast<long long>(step));
  return buf;
}

void write_rollout_file(const std::string& path, const std::string& run_name, const RolloutTable& t) {
  HONE_CHECK(H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0, "this HDF5 library has no deflate filter");
  const size_t n = t.rows.size();
  std::vector<int64_t> group, prompt_id, prompt_tokens, completion_tokens;
  std::vector<double> reward, advantage, logprob_sum;
  std::vector<int8_t> correct, trained, finish;
  std::vector<const std::string*> prompts, completions, answers;
  std::map<std::string, std::vector<double>> scores;
  for (size_t i = 0; i < n; ++i) {
    const RolloutRecord& r = t.rows[i];
    group.push_back(r.group);
    prompt_id.push_back(r.prompt_id);
    prompt_tokens.push_back(r.prompt_tokens);
    completion_tokens.push_back(r.completion_tokens);
    reward.push_back(r.reward);
    advantage.push_back(r.advantage);
    logprob_sum.push_back(r.logprob_sum);
    correct.push_back(r.correct ? 1 : 0);
    trained.push_back(r.trained ? 1 : 0);
    finish.push_back(r.truncated ? 1 : 0);
    prompts.push_back(&r.prompt);
    completions.push_back(&r.completion);
    answers.push_back(&r.answer);
    for (const auto& [name, value] : r.scores) {
      auto& col = scores[name];
      col.resize(n, std::numeric_limits<double>::quiet_NaN());
      col[i] = value;
    }
  }
  {  // built in memory, written by write_file_atomic (output_hdf5.h, create_memory_file)
    Handle f = h5out::create_memory_file();
    h5out::set_attr(f, "format", std::string(kRolloutFormat));
    h5out::set_attr(f, "run_name", run_name);
    h5out::set_attr(f, "step", t.step);
    h5out::set_attr(f, "count", int64_t(n));
    write_i64(f, "group", group);
    write_i64(f, "prompt_id", prompt_id);
    write_i64(f, "prompt_tokens", prompt_tokens);
    write_i64(f, "completion_tokens", completion_tokens);
    write_f64(f, "reward", reward);
    write_f64(f, "advantage", advantage);
    write_f64(f, "generation_logprob_sum", logprob_sum);
    write_i8(f, "correct", correct);
    write_i8(f, "trained", trained);
    write_i8(f, "finish_reason", finish);
    {
      Handle d(H5Dopen2(f, "finish_reason", H5P_DEFAULT), H5Dclose, "H5Dopen2(finish_reason)");
      h5out::set_attr(d, "values", std::string("0: stop (a stop token or string), 1: length (max_new_tokens)"));
    }
    write_text(f, "prompt", prompts);
    write_text(f, "completion", completions);
    write_text(f, "answer", answers);
    for (const auto& [name, col] : scores) write_f64(f, "scores/" + name, col);
    write_file_atomic(path, h5out::file_image(f));
  }
}

}  // namespace hone
