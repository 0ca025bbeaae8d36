// doc/architecture.md maps every folder of src/: a folder added without its place in the map fails here, by name.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/paths.h"

namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(architecture_doc)

BOOST_AUTO_TEST_CASE(names_every_source_folder) {
  const fs::path src = fs::path(test::source_dir()) / "src";
  std::ifstream in(fs::path(test::source_dir()) / "doc" / "architecture.md");
  BOOST_TEST_REQUIRE(in.good(), "doc/architecture.md is missing");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();

  int folders = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_directory()) continue;
    ++folders;
    const std::string name = "src/" + fs::relative(e.path(), src).generic_string() + "/";
    BOOST_TEST(doc.find("`" + name) != std::string::npos,
               "doc/architecture.md does not mention `" << name << "`: add the folder to its map");
  }
  BOOST_TEST(folders > 0, "no folder found under " << src.string());
}

BOOST_AUTO_TEST_SUITE_END()
