// Hdf5File: datasets and attributes written and read back, nested paths, and errors for missing things.
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "common/paths.h"
#include "io/hdf5_file.h"
#include "runtime/error.h"

BOOST_AUTO_TEST_SUITE(hdf5_file)

BOOST_AUTO_TEST_CASE(datasets_and_attributes_round_trip) {
  const std::string path = test::temp_dir("hdf5_round_trip") + "/f.h5";
  {
    hone::Hdf5File f(path, hone::Hdf5File::Mode::create);
    f.write_f32("/a", std::vector<float>{1.5f, -2.f, 3.25f});
    f.write_i64("/steps/nested/b", std::vector<int64_t>{0, 7, int64_t(1) << 40});
    const int32_t c[] = {4, 5};
    f.write_i32("/c", c, 2);
    f.write_f32("/empty", std::vector<float>{});
    f.set_attribute("/", "deck", "[run]\nname = \"x\"");
    f.set_attribute("/", "deck", "replaced");
    f.flush();
    BOOST_CHECK_THROW(f.write_f32("/a", std::vector<float>{1.f}), hone::Error);  // exists already
  }
  hone::Hdf5File f(path, hone::Hdf5File::Mode::read);
  BOOST_TEST(f.read_f32("/a") == (std::vector<float>{1.5f, -2.f, 3.25f}));
  BOOST_TEST(f.read_i64("/steps/nested/b") == (std::vector<int64_t>{0, 7, int64_t(1) << 40}));
  BOOST_TEST(f.read_i64("/c") == (std::vector<int64_t>{4, 5}));  // converted on read
  BOOST_TEST(f.size("/empty") == 0);
  BOOST_TEST(f.exists("/steps"));
  BOOST_TEST(f.exists("/steps/nested/b"));
  BOOST_TEST(!f.exists("/steps/missing/b"));
  BOOST_TEST(f.attribute("/", "deck") == "replaced");
  BOOST_CHECK_THROW(f.read_f32("/nope"), hone::UserError);
  BOOST_CHECK_THROW(f.attribute("/", "nope"), hone::UserError);
}

BOOST_AUTO_TEST_CASE(opening_a_missing_file_is_a_user_error) {
  const std::string path = test::temp_dir("hdf5_missing") + "/none.h5";
  BOOST_CHECK_THROW(hone::Hdf5File(path, hone::Hdf5File::Mode::read), hone::UserError);
  BOOST_TEST(!std::filesystem::exists(path));
}

BOOST_AUTO_TEST_SUITE_END()
