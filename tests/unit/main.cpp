// The unit suite's entry point: every tests/unit/*.cpp is one part of this one Boost.Test module.
#define BOOST_TEST_MODULE hone_unit
#include <boost/test/unit_test.hpp>
