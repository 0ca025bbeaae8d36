// Writes log lines for tests/unit/test_runtime_log.cpp (settings come from HONE_LOG_LEVEL and HONE_LOG_ALL_RANKS,
// read by run_guarded).
//   log_lines          one line at each level, then a two-line message
//   log_lines threads  8 threads writing 200 info lines each at once
#include <string>
#include <thread>
#include <vector>

#include "runtime/log.h"
#include "runtime/runtime.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  return hone::run_guarded(true, &argc, &argv, [&] {
    if (mode == "threads") {
      std::vector<std::thread> threads;
      for (int t = 0; t < 8; ++t)
        threads.emplace_back([t] {
          for (int i = 0; i < 200; ++i) hone::log_info("thread ", t, " line ", i, " ", std::string(64, 'x'));
        });
      for (auto& th : threads) th.join();
      return 0;
    }
    hone::log_debug("debug line");
    hone::log_info("info line");
    hone::log_warn("warn line");
    hone::log_error("error line");
    hone::log_info("two\nlines");
    return 0;
  });
}
