// PhaseTimer bookkeeping.
#include "runtime/timer.h"

#include "runtime/error.h"

namespace hone {

PhaseTimer::Phase* PhaseTimer::find(const std::string& phase) {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == phase) return &data_[i];
  return nullptr;
}

const PhaseTimer::Phase* PhaseTimer::find(const std::string& phase) const {
  return const_cast<PhaseTimer*>(this)->find(phase);
}

void PhaseTimer::start(const std::string& phase) {
  Phase* p = find(phase);
  if (!p) {
    names_.push_back(phase);
    data_.emplace_back();
    p = &data_.back();
  }
  HONE_CHECK(!p->running, "phase '", phase, "' started twice");
  if (sync_) sync_();
  p->running = true;
  p->started = std::chrono::steady_clock::now();
}

void PhaseTimer::stop(const std::string& phase) {
  Phase* p = find(phase);
  HONE_CHECK(p && p->running, "phase '", phase, "' stopped but not running");
  if (sync_) sync_();
  p->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - p->started).count();
  p->running = false;
}

bool PhaseTimer::running(const std::string& phase) const {
  const Phase* p = find(phase);
  return p && p->running;
}

double PhaseTimer::seconds(const std::string& phase) const {
  const Phase* p = find(phase);
  return p ? p->seconds : 0.0;
}

void PhaseTimer::clear() {
  names_.clear();
  data_.clear();
}

}  // namespace hone
