// The C ABI plug-in reward (see plugin_reward.h and include/hone/reward_plugin.h).
#include "reward/plugin_reward.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "hone/reward_plugin.h"
#include "runtime/error.h"

namespace hone::reward {

struct PluginReward::Api {
  int (*abi_version)(void) = nullptr;
  void* (*create)(const char*, int, char*, size_t) = nullptr;
  int (*score)(void*, const hone_reward_query*, hone_reward_result*, size_t, char*, size_t) = nullptr;
  void (*destroy)(void*) = nullptr;
  int (*num_scores)(void*) = nullptr;
  const char* (*score_name)(void*, int) = nullptr;
};

namespace {

// A plug-in that calls exit() inside one of its functions would end hone with the plug-in's status (exit(0): a
// "success" mid-run, without a checkpoint or the done line). While a plug-in function runs, an exit handler knows
// which and turns such an exit into hone's one-line user error, exit 2.
std::atomic<const char*> plugin_call{nullptr};

void exit_inside_plugin() {
  const char* what = plugin_call.load();
  if (!what) return;
  const char* parts[] = {"hone: error: reward.library: the plug-in called exit() inside ", what,
                         "; a plug-in reports a failure by its return value and error text\n"};
  for (const char* p : parts) {
    const ssize_t n = ::write(2, p, std::strlen(p));
    (void)n;
  }
  ::_exit(kExitUserError);
}

// Marks a plug-in call for exit_inside_plugin.
class PluginCall {
 public:
  explicit PluginCall(const char* what) {
    static const bool registered = std::atexit(exit_inside_plugin) == 0;
    (void)registered;
    plugin_call.store(what);
  }
  ~PluginCall() { plugin_call.store(nullptr); }
  PluginCall(const PluginCall&) = delete;
  PluginCall& operator=(const PluginCall&) = delete;
};

template <typename F>
void find(void* lib, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(lib, symbol));
}

std::string error_text(const char* buf) {
  std::string s(buf);
  return s.empty() ? std::string("(no message)") : s;
}

}  // namespace

PluginReward::PluginReward(const std::string& path, const std::string& options, int rank)
    : path_(path), rank_(rank) {
  HONE_USER_CHECK(!path.empty(), "reward.library is empty");
  // dlopen searches the library path for a bare name: a path without '/' is taken relative to the working folder.
  const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
  void* lib = ::dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    throw UserError(cat("reward.library = \"", path, "\": cannot load it: ", e ? e : "dlopen failed"));
  }
  api_ = std::make_unique<Api>();
  find(lib, "hone_reward_abi_version", api_->abi_version);
  find(lib, "hone_reward_create", api_->create);
  find(lib, "hone_reward_score", api_->score);
  find(lib, "hone_reward_destroy", api_->destroy);
  find(lib, "hone_reward_num_scores", api_->num_scores);
  find(lib, "hone_reward_score_name", api_->score_name);
  std::string missing;
  if (!api_->abi_version) missing += " hone_reward_abi_version";
  if (!api_->create) missing += " hone_reward_create";
  if (!api_->score) missing += " hone_reward_score";
  if (!api_->destroy) missing += " hone_reward_destroy";
  if (!missing.empty() || !api_->num_scores != !api_->score_name) {
    api_.reset();
    HONE_USER_CHECK(missing.empty(), "reward.library = \"", path, "\" does not export", missing,
                    " (include/hone/reward_plugin.h lists what a plug-in exports, with C linkage)");
    throw UserError(cat("reward.library = \"", path, "\" exports one of hone_reward_num_scores and "
                        "hone_reward_score_name but not the other"));
  }
  const int version = api_->abi_version();
  if (version != HONE_REWARD_ABI_VERSION) {
    api_.reset();
    throw UserError(cat("reward.library = \"", path, "\" was built for reward plug-in ABI version ", version,
                        ", this hone speaks version ", HONE_REWARD_ABI_VERSION,
                        ": rebuild it against this hone's include/hone/reward_plugin.h"));
  }
  char err[1024] = {0};
  {
    const PluginCall call("hone_reward_create");
    state_ = api_->create(options.c_str(), rank, err, sizeof err - 1);
  }
  if (!state_) {
    api_.reset();
    throw UserError(cat("reward.library = \"", path, "\": hone_reward_create failed (reward.library_options = \"",
                        options, "\"): ", error_text(err)));
  }
  // A sub-score the plug-in names wrongly ends the run: its state is destroyed first (the destructor does not run for
  // a constructor that throws).
  try {
    read_score_names();
  } catch (...) {
    api_->destroy(state_);
    state_ = nullptr;
    throw;
  }
}

void PluginReward::read_score_names() {
  const std::string& path = path_;
  if (api_->num_scores) {
    const int n = api_->num_scores(state_);
    HONE_USER_CHECK(n >= 0 && size_t(n) <= kMaxScoreNames, "reward.library = \"", path, "\": hone_reward_num_scores gave ", n);
    for (int i = 0; i < n; ++i) {
      const char* s = api_->score_name(state_, i);
      const std::string name = s ? s : "";
      HONE_USER_CHECK(valid_score_name(name), "reward.library = \"", path, "\": sub-score ", i, " is named \"",
                      name.substr(0, 80), "\": a name is 1-64 letters, digits, '_', '.' or '-'");
      for (const auto& other : score_names_)
        HONE_USER_CHECK(other != name, "reward.library = \"", path, "\": two sub-scores are named \"", name, "\"");
      score_names_.push_back(name);
    }
  }
}

PluginReward::~PluginReward() {
  if (api_ && state_) api_->destroy(state_);
}

std::vector<RewardResult> PluginReward::score(const std::vector<RewardQuery>& batch) {
  if (batch.empty()) return {};
  const size_t n = batch.size(), k = score_names_.size();
  // Copies that end in a NUL (a string_view into a rollout need not), and the messages as JSON.
  std::vector<std::string> messages(n), completions(n);
  std::vector<hone_reward_query> q(n);
  for (size_t i = 0; i < n; ++i) {
    const data::Prompt& p = *batch[i].prompt;
    nlohmann::json m = nlohmann::json::array();
    for (const auto& msg : p.messages) m.push_back({{"role", msg.role}, {"content", msg.content}});
    if (m.empty()) m.push_back({{"role", "user"}, {"content", p.text}});
    messages[i] = m.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    completions[i] = std::string(batch[i].completion);
    q[i] = {};
    q[i].prompt = p.text.c_str();
    q[i].prompt_size = p.text.size();
    q[i].completion = completions[i].c_str();
    q[i].completion_size = completions[i].size();
    q[i].answer = p.answer.c_str();
    q[i].answer_size = p.answer.size();
    q[i].extra_json = p.extra_json.c_str();
    q[i].extra_json_size = p.extra_json.size();
    q[i].messages_json = messages[i].c_str();
    q[i].messages_json_size = messages[i].size();
    q[i].prompt_id = p.id;
    q[i].step = batch[i].step;
    q[i].completion_tokens = batch[i].completion_tokens;
    q[i].truncated = batch[i].truncated ? 1 : 0;
  }
  std::vector<double> scores(n * k, std::numeric_limits<double>::quiet_NaN());
  std::vector<hone_reward_result> res(n);
  for (size_t i = 0; i < n; ++i) res[i] = {0.0, -1, k ? scores.data() + i * k : nullptr};
  char err[1024] = {0};
  int rc = 0;
  {
    const PluginCall call("hone_reward_score");
    rc = api_->score(state_, q.data(), res.data(), n, err, sizeof err - 1);
  }
  const int64_t step = batch.front().step;
  HONE_USER_CHECK(rc == 0, name(), " on rank ", rank_, ": hone_reward_score failed at step ", step, " (", rc,
                  "): ", error_text(err));
  std::vector<RewardResult> out(n);
  for (size_t i = 0; i < n; ++i) {
    HONE_USER_CHECK(std::isfinite(res[i].reward), name(), " on rank ", rank_, ": the reward of rollout ", i + 1,
                    " of ", n, " at step ", step, " is ", res[i].reward, " (a reward must be finite)");
    HONE_USER_CHECK(std::fabs(res[i].reward) <= double(std::numeric_limits<float>::max()), name(), " on rank ",
                    rank_, ": the reward of rollout ", i + 1, " of ", n, " at step ", step, " is ", res[i].reward,
                    ", beyond the range of a 32-bit float (3.4e38), in which rewards are trained on");
    out[i].reward = res[i].reward;
    out[i].correct = res[i].correct < 0 ? res[i].reward > 0 : res[i].correct != 0;
    for (size_t s = 0; s < k; ++s) {
      const double v = scores[i * k + s];
      if (std::isnan(v)) continue;
      HONE_USER_CHECK(std::isfinite(v), name(), " on rank ", rank_, ": sub-score ", score_names_[s],
                      " of rollout ", i + 1, " at step ", step, " is ", v);
      out[i].scores.push_back({score_names_[s], v});
    }
  }
  return out;
}

}  // namespace hone::reward
