// Fuzz driver: the output file as a resumed run reopens it (io/step_output.cpp, io/output_hdf5.cpp): the rows up
// to the checkpoint's step are kept, later ones dropped, and the file rewritten. The file is one hone wrote
// (tests/fuzz/data/output/t.h5, two steps), cut short where the input says, as a full disk or a copy interrupted
// would leave it. Arbitrary bytes inside HDF5's own metadata are not fed: libhdf5 1.10 itself loops or crashes on
// some (tests/fuzz/known/hdf5_resume/, doc/runtime.md), which no check in hone can prevent.
// Input: a byte giving the step resumed from (0-15), four bytes giving the length kept (little-endian, modulo the
// file size + 1), then up to 64 bytes written over the file from that length on (garbage after the cut).
#include "fuzz/fuzz_common.h"
#include "io/step_output.h"

namespace {
const std::string& original() {
  static const std::string bytes = [] {
    std::ifstream in("tests/fuzz/data/output/t.h5", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  return bytes;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5 || original().empty()) return 0;
  const uint32_t cut = uint32_t(data[1]) | uint32_t(data[2]) << 8 | uint32_t(data[3]) << 16 | uint32_t(data[4]) << 24;
  std::string file = original().substr(0, cut % (original().size() + 1));
  file.append(reinterpret_cast<const char*>(data + 5), std::min<size_t>(size - 5, 64));
  const std::string dir = fuzz::fresh_dir("out");
  fuzz::write_file(dir + "/t.h5", file);
  hone::StepOutputOptions o;
  o.dir = dir;
  o.run_name = "t";
  o.resume_step = data[0] & 15;
  o.sample_every = 1;
  o.deck_toml = "[run]\nname = \"t\"\n";
  fuzz::expect_user_error_or_success([&] {
    hone::StepOutput out(o);
    hone::StepRow row(out.last_step() + 1 > o.resume_step ? out.last_step() + 1 : o.resume_step + 1);
    row.set("reward/mean", 0.5);
    row.add_sample("p", "c", 1.0);
    out.append(row);
  });
  return 0;
}
