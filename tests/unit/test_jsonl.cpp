// JSON Lines reading and writing: line numbers, parse errors as values, random access, round trips.
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "common/paths.h"
#include "io/json_nesting.h"
#include "io/jsonl.h"
#include "runtime/error.h"

namespace {
std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(jsonl)

BOOST_AUTO_TEST_CASE(reader_gives_line_numbers_and_errors) {
  std::string dir = test::temp_dir("jsonl_reader");
  std::string path = write_file(dir + "/a.jsonl", "{\"a\": 1}\n\n  \n{\"a\": 2\n[1,2,3]\r\n{\"tokens\": [5, 6]}");
  hone::JsonlReader r(path);
  hone::JsonlRecord rec;
  std::vector<int64_t> lines;
  std::vector<bool> ok;
  std::vector<uint64_t> offsets;
  while (r.next(rec)) {
    lines.push_back(rec.line_number);
    ok.push_back(rec.ok);
    offsets.push_back(rec.offset);
    if (rec.line_number == 4) BOOST_TEST(rec.error.find("invalid JSON") == 0);
    if (rec.line_number == 5) BOOST_TEST(rec.value.size() == 3u);  // the CR is not part of the line
  }
  BOOST_TEST(lines == (std::vector<int64_t>{1, 4, 5, 6}), boost::test_tools::per_element());
  BOOST_TEST(ok == (std::vector<bool>{true, false, true, true}), boost::test_tools::per_element());
  BOOST_TEST(rec.value["tokens"][1].get<int>() == 6);
  // Random access by offset gives the same line again.
  BOOST_TEST(r.read_at(offsets[0], 1, rec));
  BOOST_TEST(rec.value["a"].get<int>() == 1);
  BOOST_TEST(r.read_at(offsets[3], 6, rec));
  BOOST_TEST(rec.value["tokens"].size() == 2u);
  BOOST_TEST(rec.where("x.jsonl") == "x.jsonl:6");
  BOOST_TEST(!r.read_at(1u << 20, 99, rec));
}

BOOST_AUTO_TEST_CASE(byte_order_mark_and_no_final_newline) {
  std::string path = write_file(test::temp_dir("jsonl_bom") + "/b.jsonl", "\xEF\xBB\xBF{\"a\": 1}\n{\"a\": 2}");
  hone::JsonlReader r(path);
  hone::JsonlRecord rec;
  BOOST_TEST(r.next(rec));
  BOOST_TEST(rec.ok, rec.error);
  BOOST_TEST(r.next(rec));
  BOOST_TEST(rec.value["a"].get<int>() == 2);
  BOOST_TEST(!r.next(rec));
}

BOOST_AUTO_TEST_CASE(missing_file_is_a_user_error) {
  BOOST_CHECK_THROW(hone::JsonlReader("/nonexistent/dir/x.jsonl"), hone::UserError);
  BOOST_CHECK_THROW(hone::JsonlWriter("/nonexistent/dir/x.jsonl"), hone::UserError);
}

BOOST_AUTO_TEST_CASE(writer_round_trips_and_replaces_bad_utf8) {
  std::string path = test::temp_dir("jsonl_writer") + "/out.jsonl";
  {
    hone::JsonlWriter w(path);
    w.write({{"tokens", {1, 2, 3}}, {"text", "caf\xC3\xA9"}});
    w.write({{"text", std::string("bad \xFF byte")}});
    BOOST_TEST(w.lines_written() == 2);
    w.close();
  }
  {
    hone::JsonlWriter w(path, /*append=*/true);
    w.write(nlohmann::json::array({7}));
    w.close();
  }
  hone::JsonlReader r(path);
  hone::JsonlRecord rec;
  BOOST_TEST(r.next(rec));
  BOOST_TEST(rec.ok);
  BOOST_TEST(rec.value["tokens"] == nlohmann::json({1, 2, 3}));
  BOOST_TEST(rec.value["text"].get<std::string>() == "caf\xC3\xA9");
  BOOST_TEST(r.next(rec));
  BOOST_TEST(rec.ok);
  BOOST_TEST(rec.value["text"].get<std::string>() == "bad \xEF\xBF\xBD byte");
  BOOST_TEST(r.next(rec));
  BOOST_TEST(rec.line_number == 3);
  BOOST_TEST(!r.next(rec));
}

BOOST_AUTO_TEST_CASE(nesting_is_counted_outside_strings) {
  BOOST_TEST(hone::json_nesting("1") == 0);
  BOOST_TEST(hone::json_nesting("{\"a\": [1, {\"b\": []}]}") == 4);
  BOOST_TEST(hone::json_nesting("\"[[[[\\\"[[\"") == 0);  // brackets inside a string (with an escaped quote)
  BOOST_TEST(hone::json_nesting(std::string(256, '[') + std::string(256, ']')) == 256);
  BOOST_TEST(hone::json_nesting_error(std::string(256, '[') + std::string(256, ']')).empty());
  BOOST_TEST(hone::json_nesting(std::string(1000000, '[')) == hone::kMaxJsonNesting + 1);  // stops counting there
  BOOST_TEST(hone::json_nesting_error(std::string(257, '{')).find("nested deeper than 256 levels") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
