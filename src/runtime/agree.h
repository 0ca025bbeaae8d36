// Agreement on errors that every rank checks: each rank says whether it passed; if any rank failed, every rank
// throws the same AgreedError, so the run prints one message (rank 0) and ends cleanly with one exit code on every
// rank, instead of aborting. Use it for checks that all ranks evaluate at the same point (deck, files, shapes):
//
//   Config cfg = hone::agreed([&] { return load_config(path); });   // a deck error on any rank: exit 2, printed once
//   hone::agree(fs::exists(p), hone::cat("cannot read ", p));        // exit 2 on every rank when any rank lacks p
//
// Both are collectives over MPI_COMM_WORLD (every rank must call them); without MPI or with one rank they are local.
// The function given to agreed() must not communicate: a rank that throws would leave the others in a collective.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "runtime/activity.h"
#include "runtime/error.h"

namespace hone {

// Thrown on every rank by agree(); run_guarded() prints it once and exits every rank with exit_code().
class AgreedError : public std::runtime_error {
 public:
  AgreedError(int exit_code, const std::string& message) : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

// Returns when ok is true on every rank. Otherwise throws AgreedError on every rank carrying the failing ranks'
// messages (identical ones merged; "[rank r] " prefixes unless every rank failed alike) and the most serious
// exit_code among them (kExitFailure before kExitUserError before kExitInterrupted: the lowest non-zero).
void agree(bool ok, const std::string& message_if_not_ok = {}, int exit_code = kExitUserError);

// Runs fn on every rank, then agrees: a UserError on any rank becomes an AgreedError (exit 2) on every rank, any
// other exception one with exit 1. Returns fn's result when no rank failed.
template <typename F>
auto agreed(F&& fn) -> decltype(fn()) {
  using Result = decltype(fn());
  std::string failure;
  int code = kExitOk;
  auto run = [&](auto&& call) {
    try {
      call();
    } catch (const AgreedError& e) {
      failure = e.what(), code = e.exit_code();
    } catch (const UserError& e) {
      failure = e.what(), code = kExitUserError;
    } catch (const std::exception& e) {
      failure = resource_failure_message(e);  // out of memory: a user error saying while doing what
      code = failure.empty() ? kExitFailure : kExitUserError;
      if (failure.empty()) failure = e.what();
    } catch (...) {
      failure = "unknown exception", code = kExitFailure;
    }
  };
  if constexpr (std::is_void_v<Result>) {
    run([&] { fn(); });
    agree(code == kExitOk, failure, code);
  } else {
    std::optional<Result> result;
    run([&] { result.emplace(fn()); });
    agree(code == kExitOk, failure, code);
    return std::move(*result);
  }
}

}  // namespace hone
