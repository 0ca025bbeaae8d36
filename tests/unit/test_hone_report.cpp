// tools/hone-report on real output files of short demo runs: the text table, --csv and --markdown against the
// values in the file, several runs side by side, the PNG curves and their pixel size, every error case (one line,
// exit 2), the #!/usr/bin/python3 line, and reading a file while its run is writing it.
#include <boost/test/unit_test.hpp>

#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../common/paths.h"

namespace fs = std::filesystem;
namespace tt = boost::test_tools;

namespace {

boost::test_tools::assertion_result python_has_modules(boost::unit_test::test_unit_id) {
  const int rc = test::run_command("/usr/bin/python3 -c 'import h5py, numpy, matplotlib'");
  boost::test_tools::assertion_result r(rc == 0);
  if (rc != 0) r.message() << "skipped: /usr/bin/python3 cannot import h5py, numpy and matplotlib (make deps)";
  return r;
}

std::string tool() { return test::source_dir() + "/tools/hone-report"; }

// A demo run of `steps` steps into dir/out/<name>.h5 (a step of the demo costs about 0.1 s).
std::string demo_run(const std::string& dir, const std::string& name, int steps, int seed) {
  std::string out;
  const int rc = test::run_command(test::hone_exe() + " run input/demo.toml run.name=" + name +
                                       " run.max_steps=" + std::to_string(steps) + " run.seed=" + std::to_string(seed) +
                                       " output.dir=" + dir + "/out checkpoint.dir=" + dir + "/ckpt-" + name,
                                   &out);
  BOOST_TEST_REQUIRE(rc == 0, out);
  return dir + "/out/" + name + ".h5";
}

// The file most cases read: 10 steps, so the default table (the last 8 steps) is steps 3-10.
const std::string& demo_file() {
  static const std::string path = demo_run(test::temp_dir("hone_report"), "demo", 10, 1234);
  return path;
}

struct Result {
  int rc = 0;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the tool through Debian's Python, as the #! line does.
Result report(const std::string& args) {
  static int count = 0;
  const std::string err_file = test::temp_dir("hone_report_err") + "/stderr" + std::to_string(count++);
  Result r;
  r.rc = test::run_command("(/usr/bin/python3 " + tool() + " " + args + " 2>" + err_file + ")", &r.out);
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  return r;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  v.push_back(cur);
  return v;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}

std::vector<double> read_metric(const std::string& file, const std::string& name) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  BOOST_TEST_REQUIRE(f >= 0);
  hid_t d = H5Dopen2(f, ("/steps/" + name).c_str(), H5P_DEFAULT);
  BOOST_TEST_REQUIRE(d >= 0, name);
  hid_t s = H5Dget_space(d);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(s, &n, nullptr);
  std::vector<double> v(n);
  if (n > 0) BOOST_TEST_REQUIRE(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  return v;
}

// The expected table of one file, computed here from the file's datasets (the definitions of doc/report.md).
struct Expected {
  std::vector<double> step, total, training, refit, generation, logprob, tokens, gen_rate, step_rate, generated;
  std::vector<double> reward = {}, accuracy = {};
  explicit Expected(const std::string& file)
      : step(read_metric(file, "step")),
        total(read_metric(file, "time/total")),
        training(read_metric(file, "time/training")),
        refit(read_metric(file, "time/refit")),
        generation(read_metric(file, "time/generation")),
        logprob(read_metric(file, "time/logprob")),
        tokens(read_metric(file, "generated_tokens/mean")),
        gen_rate(read_metric(file, "tokens_per_s/generation")),
        reward(read_metric(file, "reward/mean")),
        accuracy(read_metric(file, "accuracy")) {
    for (size_t i = 0; i < step.size(); ++i) {
      generated.push_back(std::round(gen_rate[i] * generation[i]));
      step_rate.push_back(generated.back() / total[i]);
    }
  }
  std::vector<double> row(size_t i) const {
    return {total[i], training[i], refit[i], generation[i], logprob[i], tokens[i], gen_rate[i], step_rate[i]};
  }
  // The mean row over rows [a, b]: means, except the rates (all tokens over all seconds).
  std::vector<double> mean(size_t a, size_t b) const {
    std::vector<double> m(8, 0.0);
    double tok = 0, gen_s = 0, total_s = 0;
    for (size_t i = a; i <= b; ++i) {
      const auto r = row(i);
      for (int c = 0; c < 6; ++c) m[c] += r[c] / double(b - a + 1);
      tok += generated[i];
      gen_s += generation[i];
      total_s += total[i];
    }
    m[6] = tok / gen_s;
    m[7] = tok / total_s;
    return m;
  }
};

// A number as the text table prints it equals `expected` to the digits printed: half a unit of the last decimal
// printed, or 5% in e-notation (one decimal of mantissa).
bool printed_equal(const std::string& text, double expected) {
  const double value = std::stod(text);
  if (text.find('e') != std::string::npos) return std::fabs(value - expected) <= 0.051 * std::fabs(expected);
  const size_t dot = text.find('.');
  const int decimals = dot == std::string::npos ? 0 : int(text.size() - dot - 1);
  return std::fabs(value - expected) <= 0.5001 * std::pow(10.0, -decimals);
}

const std::vector<std::string> kColumns = {"run",          "step",      "total_s",           "training_s",
                                           "refit_s",      "generation_s", "logprob_s",      "tokens_per_sample",
                                           "gen_tokens_per_s", "step_tokens_per_s", "reward", "accuracy",
                                           "val_accuracy"};

// PNG: the 8-byte signature, then the IHDR chunk (length, "IHDR", width and height as big-endian uint32).
std::pair<uint32_t, uint32_t> png_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char b[24] = {};
  in.read(reinterpret_cast<char*>(b), 24);
  BOOST_TEST_REQUIRE(in.gcount() == 24);
  BOOST_TEST_REQUIRE(std::string(reinterpret_cast<char*>(b) + 1, 3) == "PNG", path);
  BOOST_TEST_REQUIRE(std::string(reinterpret_cast<char*>(b) + 12, 4) == "IHDR", path);
  auto be = [&](int o) { return uint32_t(b[o]) << 24 | uint32_t(b[o + 1]) << 16 | uint32_t(b[o + 2]) << 8 | b[o + 3]; };
  return {be(16), be(20)};
}

const std::vector<std::string> kCurves = {"reward", "accuracy", "entropy", "clip_fraction", "generated_length",
                                          "val_accuracy"};

// /validation/step and /validation/accuracy.
std::pair<std::vector<int64_t>, std::vector<double>> validation_accuracy(const std::string& file) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  BOOST_TEST_REQUIRE(f >= 0);
  auto read = [&](const char* name, hid_t type, void* out, size_t want) {
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    BOOST_TEST_REQUIRE(d >= 0, name);
    hid_t sp = H5Dget_space(d);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(sp, &n, nullptr);
    BOOST_TEST_REQUIRE(n == want, name);
    if (n > 0) BOOST_TEST_REQUIRE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0);
    H5Sclose(sp);
    H5Dclose(d);
  };
  hid_t d = H5Dopen2(f, "/validation/step", H5P_DEFAULT);
  BOOST_TEST_REQUIRE(d >= 0);
  hid_t sp = H5Dget_space(d);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(sp, &n, nullptr);
  H5Sclose(sp);
  H5Dclose(d);
  std::vector<int64_t> step(n);
  std::vector<double> acc(n);
  read("/validation/step", H5T_NATIVE_INT64, step.data(), n);
  read("/validation/accuracy", H5T_NATIVE_DOUBLE, acc.data(), n);
  H5Fclose(f);
  return {step, acc};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hone_report, *boost::unit_test::precondition(python_has_modules))

BOOST_AUTO_TEST_CASE(text_table_is_the_last_8_steps_aligned_with_the_files_values) {
  const std::string file = demo_file();
  const Expected e(file);
  BOOST_TEST_REQUIRE(e.step.size() == 10u);
  const auto val = validation_accuracy(file);
  BOOST_TEST_REQUIRE((val.first == std::vector<int64_t>{0, 10}));
  const Result r = report(file + " --no-plots");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.err.empty(), r.err);
  const auto lines = lines_of(r.out);
  BOOST_TEST_REQUIRE(lines.size() == 10u, r.out);  // header, steps 3-10, the mean row
  BOOST_TEST(words(lines[0]) == kColumns, tt::per_element());
  for (const auto& l : lines) BOOST_TEST(l.size() == lines[0].size(), l);  // aligned
  for (size_t k = 1; k <= 8; ++k) {
    const auto w = words(lines[k]);
    BOOST_TEST_REQUIRE(w.size() == kColumns.size(), lines[k]);
    BOOST_TEST(w[0] == "demo");
    const size_t i = k + 1;  // rows 2..9 hold steps 3..10
    BOOST_TEST(std::stoi(w[1]) == int(e.step[i]));
    const auto expect = e.row(i);
    for (size_t c = 0; c < expect.size(); ++c)
      BOOST_TEST(printed_equal(w[c + 2], expect[c]), kColumns[c + 2] << " step " << w[1] << ": " << w[c + 2]
                                                                       << " printed for " << expect[c]);
    // The demo validates at the start and every 10 steps: of steps 3-10 only step 10 has a validation.
    BOOST_TEST(printed_equal(w[10], e.reward[i]), w[10]);
    BOOST_TEST(printed_equal(w[11], e.accuracy[i]), w[11]);
    if (i == 9)
      BOOST_TEST(printed_equal(w[12], val.second[1]), w[12]);
    else
      BOOST_TEST(w[12] == "-");
  }
  const auto m = words(lines[9]);
  BOOST_TEST_REQUIRE(m.size() == kColumns.size() + 1, lines[9]);  // "mean 3-10" is two words
  BOOST_TEST(m[1] == "mean");
  BOOST_TEST(m[2] == "3-10");
  const auto expect = e.mean(2, 9);
  for (size_t c = 0; c < expect.size(); ++c)
    BOOST_TEST(printed_equal(m[c + 3], expect[c]), kColumns[c + 2] << ": " << m[c + 3] << " printed for " << expect[c]);
  double reward = 0, accuracy = 0;
  for (size_t i = 2; i <= 9; ++i) reward += e.reward[i] / 8, accuracy += e.accuracy[i] / 8;
  BOOST_TEST(printed_equal(m[11], reward), m[11]);
  BOOST_TEST(printed_equal(m[12], accuracy), m[12]);
  BOOST_TEST(printed_equal(m[13], val.second[1]), m[13]);  // the latest validation of the range
}

BOOST_AUTO_TEST_CASE(csv_parses_and_holds_the_files_values_at_full_precision) {
  const std::string file = demo_file();
  const Expected e(file);
  const Result r = report(file + " --csv --no-plots --steps 3-6 --metric grad_norm");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = lines_of(r.out);
  BOOST_TEST_REQUIRE(lines.size() == 6u, r.out);  // header, 4 steps, the mean row
  auto header = kColumns;
  header.push_back("grad_norm");
  BOOST_TEST(split(lines[0], ',') == header, tt::per_element());
  const auto grad_norm = read_metric(file, "grad_norm");
  for (size_t k = 1; k <= 4; ++k) {
    const auto c = split(lines[k], ',');
    BOOST_TEST_REQUIRE(c.size() == header.size(), lines[k]);
    BOOST_TEST(c[0] == "demo");
    const size_t i = k + 1;  // steps 3..6 are rows 2..5
    BOOST_TEST(std::stoi(c[1]) == int(e.step[i]));
    const auto expect = e.row(i);
    for (size_t j = 0; j < expect.size(); ++j)
      BOOST_TEST(std::stod(c[j + 2]) == expect[j], tt::tolerance(1e-12) << header[j + 2]);
    BOOST_TEST(std::stod(c[10]) == e.reward[i], tt::tolerance(1e-12));
    BOOST_TEST(std::stod(c[11]) == e.accuracy[i], tt::tolerance(1e-12));
    BOOST_TEST(c[12] == "");  // no validation after steps 3-6
    BOOST_TEST(std::stod(c[13]) == grad_norm[i], tt::tolerance(1e-12));
  }
  const auto m = split(lines[5], ',');
  BOOST_TEST_REQUIRE(m.size() == header.size());
  BOOST_TEST(m[1] == "mean 3-6");
  const auto expect = e.mean(2, 5);
  for (size_t j = 0; j < expect.size(); ++j)
    BOOST_TEST(std::stod(m[j + 2]) == expect[j], tt::tolerance(1e-12) << header[j + 2]);
  // The latest validation at or before step 6: the one at the start.
  BOOST_TEST(std::stod(m[10]) == (e.reward[2] + e.reward[3] + e.reward[4] + e.reward[5]) / 4, tt::tolerance(1e-12));
  BOOST_TEST(std::stod(m[12]) == validation_accuracy(file).second[0], tt::tolerance(1e-12));
  BOOST_TEST(std::stod(m[13]) == (grad_norm[2] + grad_norm[3] + grad_norm[4] + grad_norm[5]) / 4,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(markdown_has_a_header_a_rule_and_one_row_per_step) {
  const Result r = report(demo_file() + " --markdown --no-plots --steps 9-");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = lines_of(r.out);
  BOOST_TEST_REQUIRE(lines.size() == 5u, r.out);  // header, rule, steps 9 and 10, the mean row
  std::string header = "|";
  for (const auto& c : kColumns) header += " " + c + " |";
  BOOST_TEST(lines[0] == header);
  std::string rule = "| --- | --- |";  // text columns left, numbers right
  for (size_t c = 2; c < kColumns.size(); ++c) rule += " ---: |";
  BOOST_TEST(lines[1] == rule);
  for (const auto& l : lines) {
    BOOST_TEST(l.front() == '|');
    BOOST_TEST(l.back() == '|');
    BOOST_TEST(split(l, '|').size() == kColumns.size() + 2, l);
  }
  BOOST_TEST(lines[2].rfind("| demo | 9 | ", 0) == 0, lines[2]);
  BOOST_TEST(lines[3].rfind("| demo | 10 | ", 0) == 0, lines[3]);
  BOOST_TEST(lines[4].rfind("| demo | mean 9-10 | ", 0) == 0, lines[4]);
}

BOOST_AUTO_TEST_CASE(several_runs_share_one_table_and_one_set_of_plots) {
  const std::string first = demo_file();
  const std::string second = demo_run(fs::path(first).parent_path().parent_path().string(), "other", 5, 7);
  const Expected e1(first), e2(second);
  const std::string dir = test::temp_dir("hone_report_runs");
  const Result r = report(first + " " + second + " --csv --plots " + dir + " --size 640x360 --metric grad_norm");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto lines = lines_of(r.out);
  BOOST_TEST_REQUIRE(lines.size() == 1u + 9 + 6, r.out);  // header; 8 steps + mean; 5 steps + mean
  auto header = kColumns;
  header.push_back("grad_norm");
  BOOST_TEST(split(lines[0], ',') == header, tt::per_element());
  for (size_t k = 1; k <= 9; ++k) BOOST_TEST(split(lines[k], ',')[0] == "demo");
  for (size_t k = 10; k <= 15; ++k) BOOST_TEST(split(lines[k], ',')[0] == "other");
  BOOST_TEST(split(lines[9], ',')[1] == "mean 3-10");
  BOOST_TEST(split(lines[10], ',')[1] == "1");  // each run's own last 8 steps: all 5 of the short one
  BOOST_TEST(split(lines[15], ',')[1] == "mean 1-5");
  BOOST_TEST(std::stod(split(lines[12], ',')[2]) == e2.total[2], tt::tolerance(1e-12));
  BOOST_TEST(std::stod(split(lines[4], ',')[2]) == e1.total[5], tt::tolerance(1e-12));  // step 6
  // One set of plots (a line per run), at the asked size; --metric adds a column and a curve.
  for (const auto& name : {"reward", "accuracy", "entropy", "clip_fraction", "generated_length", "grad_norm"}) {
    const std::string png = dir + "/" + name + ".png";
    BOOST_TEST_REQUIRE(fs::exists(png), png);
    const auto [w, h] = png_size(png);
    BOOST_TEST(w == 640u, png);
    BOOST_TEST(h == 360u, png);
  }

  // An explicit range must be in every file.
  const Result bad = report(first + " " + second + " --no-plots --steps 3-8");
  BOOST_TEST(bad.rc == 2);
  BOOST_TEST(bad.err == "hone-report: error: " + second + ": step range 3-8 is out of bounds (the file has steps 1-5)\n");

  // A range every file holds; two files of one run name are told apart by their file names.
  const std::string copy = fs::path(first).parent_path().string() + "/copy.h5";
  fs::copy_file(first, copy, fs::copy_options::overwrite_existing);
  const Result same = report(first + " " + copy + " --csv --no-plots --steps 2-3");
  BOOST_TEST_REQUIRE(same.rc == 0, same.err);
  const auto l2 = lines_of(same.out);
  BOOST_TEST_REQUIRE(l2.size() == 7u, same.out);
  BOOST_TEST(split(l2[1], ',')[0] == "demo (demo.h5)");
  BOOST_TEST(split(l2[4], ',')[0] == "demo (copy.h5)");
  BOOST_TEST(l2[3].substr(l2[3].find(',')) == l2[6].substr(l2[6].find(',')));  // same numbers
}

BOOST_AUTO_TEST_CASE(pngs_exist_with_the_expected_pixel_size) {
  const std::string file = demo_file();
  // The default folder is next to the file, and the default size 800x500.
  const std::string default_dir = fs::path(file).replace_extension("").string() + "-report";
  fs::remove_all(default_dir);
  const Result d = report(file);
  BOOST_TEST_REQUIRE(d.rc == 0, d.err);
  for (const auto& name : kCurves) {
    const std::string png = default_dir + "/" + name + ".png";
    BOOST_TEST_REQUIRE(fs::exists(png), png);
    const auto [w, h] = png_size(png);
    BOOST_TEST(w == 800u, png);
    BOOST_TEST(h == 500u, png);
    BOOST_TEST(d.err.find("wrote " + png) != std::string::npos, d.err);
  }
  // The demo has loss.kl_coef = 0: no KL was recorded, so no kl.png, and stderr says why.
  BOOST_TEST(!fs::exists(default_dir + "/kl.png"));
  BOOST_TEST(d.err.find("no run recorded 'kl'") != std::string::npos, d.err);

  const std::string dir = test::temp_dir("hone_report_plots");
  const Result r = report(file + " --no-plots --plots " + dir);  // --no-plots wins
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(fs::is_empty(dir));
}

BOOST_AUTO_TEST_CASE(errors_are_one_line_and_exit_2) {
  const std::string file = demo_file();
  const std::string dir = test::temp_dir("hone_report_errors");
  auto expect_error = [](const std::string& args, const std::string& message) {
    const Result r = report(args + " --no-plots");
    BOOST_TEST(r.rc == 2, args);
    BOOST_TEST(r.out.empty(), r.out);
    BOOST_TEST(lines_of(r.err).size() == 1u, r.err);
    BOOST_TEST(r.err == "hone-report: error: " + message + "\n");
  };
  expect_error(dir + "/missing.h5", dir + "/missing.h5: no such file");
  std::ofstream(dir + "/text.h5") << "step,total\n1,0.5\n";
  expect_error(dir + "/text.h5",
               dir + "/text.h5: not an HDF5 file (a hone output file is the .h5 file hone run writes)");

  // HDF5, but not hone's: no format attribute.
  hid_t f = H5Fcreate((dir + "/plain.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  BOOST_TEST_REQUIRE(f >= 0);
  H5Fclose(f);
  expect_error(dir + "/plain.h5",
               dir + "/plain.h5: an HDF5 file but not a hone output file (no root attribute format = "
                     "'hone-output 1')");

  // A hone file of another layout version.
  const std::string v2 = dir + "/v2.h5";
  fs::copy_file(file, v2);
  f = H5Fopen(v2.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  BOOST_TEST_REQUIRE(f >= 0);
  BOOST_TEST_REQUIRE(H5Adelete(f, "format") >= 0);
  const std::string format = "hone-output 2";
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, format.size());
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(f, "format", type, space, H5P_DEFAULT, H5P_DEFAULT);
  BOOST_TEST_REQUIRE(H5Awrite(attr, type, format.data()) >= 0);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(f);
  expect_error(v2, v2 + ": format 'hone-output 2' is not the one this hone-report reads ('hone-output 1')");

  // Step ranges outside the file's steps 1-10, and a reversed one.
  expect_error(file + " --steps 5-11", file + ": step range 5-11 is out of bounds (the file has steps 1-10)");
  expect_error(file + " --steps 0-", file + ": step range 0-10 is out of bounds (the file has steps 1-10)");
  expect_error(file + " --steps 12", file + ": step range 12-12 is out of bounds (the file has steps 1-10)");
  expect_error(file + " --steps 9-4", "--steps 9-4: the first step is after the last");
  expect_error(file + " --steps x-4", "--steps 'x-4': expected FIRST-LAST, FIRST-, -LAST or one step number");

  // A missing metric: named, with the ones the file has.
  const std::string cut = dir + "/cut.h5";
  fs::copy_file(file, cut);
  f = H5Fopen(cut.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  BOOST_TEST_REQUIRE(f >= 0);
  BOOST_TEST_REQUIRE(H5Ldelete(f, "/steps/time/refit", H5P_DEFAULT) >= 0);
  H5Fclose(f);
  const Result m = report(cut + " --no-plots");
  BOOST_TEST(m.rc == 2);
  BOOST_TEST(lines_of(m.err).size() == 1u, m.err);
  BOOST_TEST(m.err.rfind("hone-report: error: " + cut + ": no metric 'time/refit' in the file; available: accuracy, ",
                         0) == 0, m.err);
  BOOST_TEST(m.err.find(", time/reward, time/total, time/training, ") != std::string::npos, m.err);
  // A plot folder that cannot be created (after the table, which is printed first).
  const Result p = report(file + " --plots /proc/no-such-folder");
  BOOST_TEST(p.rc == 2);
  BOOST_TEST(lines_of(p.out).size() == 10u, p.out);
  BOOST_TEST(p.err == "hone-report: error: --plots /proc/no-such-folder: cannot create the folder: No such file or "
                      "directory\n");

  const Result n = report(file + " --no-plots --metric no/such");
  BOOST_TEST(n.rc == 2);
  BOOST_TEST(lines_of(n.err).size() == 1u, n.err);
  BOOST_TEST(n.err.find(": no metric 'no/such' in the file; available: accuracy, ") != std::string::npos, n.err);
  BOOST_TEST(n.err.find("grad_norm") != std::string::npos, n.err);
}

BOOST_AUTO_TEST_CASE(runs_on_debians_python_whatever_python3_is_first_on_path) {
  const std::string dir = test::temp_dir("hone_report_path");
  std::ofstream(dir + "/python3") << "#!/bin/sh\necho wrong python >&2\nexit 99\n";
  fs::permissions(dir + "/python3", fs::perms::owner_all);
  std::string out;
  const int rc = test::run_command("PATH=" + dir + ":$PATH " + tool() + " " + demo_file() + " --csv --no-plots", &out);
  BOOST_TEST(rc == 0, out);
  BOOST_TEST(lines_of(out).size() == 10u, out);
  BOOST_TEST(out.find("wrong python") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(reads_a_file_while_its_run_writes_it) {
  const std::string dir = test::temp_dir("hone_report_live");
  const std::string file = dir + "/out/live.h5";
  // The tool reads the file over and over while a 12-step run writes it; each read prints "rc=<status> <last line>".
  const std::string script =
      "(" + test::hone_exe() + " run input/demo.toml run.name=live run.max_steps=12 output.dir=" + dir +
      "/out checkpoint.dir=" + dir + "/ckpt > " + dir + "/run.log 2>&1 & pid=$!; "
      "while kill -0 $pid 2>/dev/null; do "
      "r=$(/usr/bin/python3 " + tool() + " " + file + " --csv --no-plots --last 1 2>&1); "
      "echo \"rc=$? $(echo \"$r\" | tail -n 1)\"; done; wait $pid; echo \"run=$?\")";
  std::string out;
  test::run_command(script, &out);
  const auto lines = lines_of(out);
  BOOST_TEST_REQUIRE(!lines.empty());
  BOOST_TEST(lines.back() == "run=0", out);
  int reads = 0, last_step = 0;
  for (size_t k = 0; k + 1 < lines.size(); ++k) {
    const std::string& l = lines[k];
    if (l.rfind("rc=0 ", 0) == 0) {
      // The mean row of --last 1: "live,mean N-N,..."
      const auto c = split(l.substr(5), ',');
      BOOST_TEST_REQUIRE(c.size() == kColumns.size(), l);
      const int step = std::stoi(c[1].substr(5));
      BOOST_TEST(step >= last_step, l);  // never an older version after a newer one
      BOOST_TEST(step <= 12);
      last_step = step;
      ++reads;
    } else {
      // Before the first step the file is missing or empty: a clear error, never a traceback.
      BOOST_TEST(l.rfind("rc=2 hone-report: error: " + file + ": ", 0) == 0, l);
      BOOST_TEST((l.find("no such file") != std::string::npos || l.find("no steps yet") != std::string::npos), l);
      BOOST_TEST(reads == 0, l);
    }
  }
  BOOST_TEST(reads >= 2, out);  // read at least twice while the run went on
}

BOOST_AUTO_TEST_SUITE_END()
