// The progress line of a long phase (see progress.h).
#include "runtime/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/error.h"

namespace hone {

namespace {

// "45 s", "3m05s", "1h02m"
std::string duration_text(double s) {
  char buf[32];
  const long t = long(std::llround(std::max(0.0, s)));
  if (t < 60)
    std::snprintf(buf, sizeof buf, "%ld s", t);
  else if (t < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  return buf;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ProgressOptions ProgressOptions::for_stdout(double every_s) {
  ProgressOptions o;
  o.every_s = every_s;
  // Under a launcher stdout is mpirun's pseudo-terminal even when the job's output goes to a file: plain lines.
  bool launched = false;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(name); v && *v) launched = true;
  o.terminal = !launched && ::isatty(STDOUT_FILENO) == 1;
  return o;
}

ProgressLine::ProgressLine(ProgressOptions options, Sink sink, Clock clock)
    : options_(options), sink_(std::move(sink)), clock_(std::move(clock)) {
  HONE_CHECK(options_.every_s >= 0, "progress interval ", options_.every_s, " < 0");
  if (!sink_)
    sink_ = [](const std::string& text) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    };
  if (!clock_) clock_ = steady_seconds;
}

ProgressLine::~ProgressLine() {
  try {
    end();
  } catch (...) {
  }
}

void ProgressLine::begin(std::string what, std::string unit) {
  end();
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  what_ = std::move(what);
  unit_ = std::move(unit);
  start_ = clock_();
  next_ = start_ + (options_.terminal ? options_.terminal_after_s : options_.every_s);
  done_ = total_ = tokens_ = 0;
  running_ = true;
}

void ProgressLine::update(int64_t done, int64_t total, int64_t tokens) {
  if (!running_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = done;
  total_ = total;
  tokens_ = tokens;
  due(clock_(), done, total, tokens);
}

void ProgressLine::due(double now, int64_t done, int64_t total, int64_t tokens) {
  if (now < next_) return;
  show(now, done, total, tokens);
  next_ = now + (options_.terminal ? options_.terminal_refresh_s : options_.every_s);
}

void ProgressLine::heartbeat() {
  if (!running_ || beater_.joinable()) return;
  stop_beat_ = false;
  beater_ = std::thread([this] { beat(); });
}

void ProgressLine::beat() {
  const double interval = options_.terminal ? options_.terminal_refresh_s : options_.every_s;
  const auto pause = std::chrono::duration<double>(std::clamp(interval / 4, 0.001, 0.25));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_beat_) {
    wake_.wait_for(lock, pause);
    if (!stop_beat_ && running_) due(clock_(), done_, total_, tokens_);
  }
}

void ProgressLine::end() {
  if (beater_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_beat_ = true;
    }
    wake_.notify_all();
    beater_.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (on_screen_) sink_("\r\033[K");
  on_screen_ = false;
  running_ = false;
}

void ProgressLine::show(double now, int64_t done, int64_t total, int64_t tokens) {
  const std::string text = format(what_, unit_, done, total, tokens, now - start_);
  if (options_.terminal) {
    // Back to the line's start, the new text, then erase whatever a longer earlier text left to its right.
    sink_("\r" + text + "\033[K");
    on_screen_ = true;
  } else {
    sink_("progress: " + text + "\n");
  }
}

std::string ProgressLine::format(const std::string& what, const std::string& unit, int64_t done, int64_t total,
                                 int64_t tokens, double elapsed) {
  std::string s = cat(what, ": ", done, "/", total, " ", unit);
  if (tokens > 0) {
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.0f", elapsed > 0 ? double(tokens) / elapsed : 0.0);
    s += cat(", ", tokens, " tokens, ", rate, " tokens/s");
  }
  s += cat(", ", duration_text(elapsed), " elapsed");
  // The estimate assumes the rest goes at the pace so far; before the first unit is done there is none.
  if (done > 0 && done < total) s += cat(", ~", duration_text(elapsed * double(total - done) / double(done)), " left");
  return s;
}

}  // namespace hone
