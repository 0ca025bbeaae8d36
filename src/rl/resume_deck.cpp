// The deck record of a checkpoint and the comparison of a resumed run's deck with it (see the header).
#include "rl/resume_deck.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "runtime/error.h"
#include "runtime/one_line.h"

namespace hone::rl {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kFormat = "hone-deck-record-1";

// FNV-1a 64 over several byte strings, each preceded by its length (so that the parts cannot run together).
class Fnv {
 public:
  void add(const std::string& bytes) {
    add_raw(std::to_string(bytes.size()) + ":");
    add_raw(bytes);
  }
  std::string hex() const {
    char b[32];
    std::snprintf(b, sizeof b, "fnv1a64:%016llx", static_cast<unsigned long long>(h_));
    return b;
  }

 private:
  void add_raw(const std::string& bytes) {
    for (unsigned char c : bytes) h_ = (h_ ^ c) * 1099511628211ULL;
  }
  uint64_t h_ = 14695981039346656037ULL;
};

// A file's bytes ("" when it cannot be read), at most `limit` of them.
std::string read_bytes(const fs::path& p, size_t limit = SIZE_MAX) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::string out;
  char buf[1 << 16];
  while (out.size() < limit && in.read(buf, sizeof buf).gcount() > 0)
    out.append(buf, std::min(size_t(in.gcount()), limit - out.size()));
  return out;
}

// A safetensors file's header: the 8-byte length and the JSON (names, dtypes, shapes, offsets), at most 64 MiB.
std::string safetensors_header(const fs::path& p) {
  const std::string head = read_bytes(p, 8);
  if (head.size() < 8) return head;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(head[size_t(i)]);
  return read_bytes(p, size_t(8 + std::min<uint64_t>(n, uint64_t(64) << 20)));
}

bool is_input_key(const std::string& key) {
  const auto& k = input_keys();
  return std::find(k.begin(), k.end(), key) != k.end();
}

// The value a record holds for key, or what an older record that lacks the key meant: its default.
std::optional<std::string> recorded_value(const DeckRecord& r, const KeySpec& k) {
  if (const auto it = r.values.find(k.path); it != r.values.end()) return it->second;
  if (k.default_value) return deck_value_to_toml(*k.default_value);
  return std::nullopt;
}

// A value for the one-line messages (a damaged record may hold any text).
std::string shown(const std::optional<std::string>& v) { return v ? one_line(*v) : std::string("(unset)"); }

}  // namespace

const std::vector<std::string>& input_keys() {
  static const std::vector<std::string> k = {"model.path", "tokenizer.path", "data.path"};
  return k;
}

std::string input_fingerprint(const std::string& key, const std::string& path) {
  if (path.empty()) return "";
  Fnv h;
  std::error_code ec;
  if (key == "data.path") {
    h.add(read_bytes(path));
  } else if (fs::is_regular_file(path, ec)) {
    // A GGUF model (model.path or tokenizer.path): its size and its first 16 MiB (metadata, tokenizer, tensors).
    h.add(std::to_string(fs::file_size(path, ec)));
    h.add(read_bytes(path, size_t(16) << 20));
  } else if (key == "tokenizer.path") {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) h.add(read_bytes(fs::path(path) / f));
  } else {
    h.add(read_bytes(fs::path(path) / "config.json"));
    std::vector<fs::path> weights;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".safetensors") weights.push_back(e.path());
    std::sort(weights.begin(), weights.end());
    for (const auto& w : weights) {
      h.add(w.filename().string());
      h.add(std::to_string(fs::file_size(w, ec)));
      h.add(safetensors_header(w));
    }
  }
  return h.hex();
}

DeckRecord record_deck(const Config& c) {
  DeckRecord r;
  for (const KeySpec& k : deck_schema())
    if (c.has_value(k.path)) r.values[k.path] = deck_value_to_toml(c.value(k.path));
  for (const std::string& k : input_keys())
    r.inputs[k] = input_fingerprint(k, c.has_value(k) ? c.get_string(k) : std::string());
  return r;
}

std::string deck_record_json(const DeckRecord& r) {
  json j;
  j["format"] = kFormat;
  j["values"] = r.values;
  j["inputs"] = r.inputs;
  return j.dump(1) + "\n";
}

DeckRecord parse_deck_record(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  HONE_USER_CHECK(!j.is_discarded() && j.is_object(), path, ": not a deck record (not a JSON object)");
  HONE_USER_CHECK(j.contains("format") && j["format"] == kFormat, path, ": unknown deck record format");
  DeckRecord r;
  for (const char* part : {"values", "inputs"}) {
    HONE_USER_CHECK(j.contains(part) && j[part].is_object(), path, ": field '", part, "' is missing or not an object");
    auto& into = std::string(part) == "values" ? r.values : r.inputs;
    for (const auto& [key, v] : j[part].items()) {
      HONE_USER_CHECK(v.is_string(), path, ": ", part, ".", one_line(key), " is not a string");
      into[key] = v.get<std::string>();
    }
  }
  return r;
}

std::string resume_refusal_reason(const std::string& key) {
  auto in = [&](const char* section) { return key.rfind(section, 0) == 0; };
  if (in("model.")) return "the model";
  if (in("tokenizer.")) return "the tokenizer";
  if (in("data.") || key == "grpo.num_prompts_per_step" || key == "grpo.num_generations_per_prompt")
    return "the data order";
  if (key == "run.seed") return "the random streams";
  return "";
}

std::vector<std::string> compare_resume_deck(const Config& now, const DeckRecord& now_record,
                                             const DeckRecord& checkpoint, const std::string& checkpoint_path) {
  std::vector<std::string> refused, accepted;
  for (const KeySpec& k : deck_schema()) {
    if (k.path == "run.resume") continue;
    const std::optional<std::string> was = recorded_value(checkpoint, k);
    const std::optional<std::string> is =
        now.has_value(k.path) ? std::optional<std::string>(deck_value_to_toml(now.value(k.path))) : std::nullopt;
    if (is_input_key(k.path) && checkpoint.inputs.count(k.path)) {
      const std::string& old_fp = checkpoint.inputs.at(k.path);
      const auto it = now_record.inputs.find(k.path);
      const std::string new_fp = it == now_record.inputs.end() ? std::string() : it->second;
      if (old_fp != new_fp) {
        refused.push_back(cat(k.path, " = ", shown(is), " (", key_location(now, k.path), "): ",
                              was == is ? "the content behind it changed since the checkpoint was written"
                                        : cat("not what the checkpoint was written with (", shown(was), ")"),
                              " (", resume_refusal_reason(k.path), ")"));
      } else if (was != is) {
        accepted.push_back(cat(k.path, " ", shown(was), " -> ", shown(is), " (the same content)"));
      }
      continue;
    }
    if (was == is) continue;
    const std::string reason = resume_refusal_reason(k.path);
    if (reason.empty())
      accepted.push_back(cat(k.path, " ", shown(was), " -> ", shown(is)));
    else
      refused.push_back(cat(k.path, " = ", shown(is), " (", key_location(now, k.path), "), was ", shown(was), " (",
                            reason, ")"));
  }
  if (!refused.empty()) {
    std::string m = cat("cannot resume from ", checkpoint_path, ": the deck changes ",
                        refused.size() == 1 ? "a key" : "keys", " a checkpoint cannot carry: ");
    for (size_t i = 0; i < refused.size(); ++i) m += (i ? "; " : "") + refused[i];
    m += ". Set ";
    m += refused.size() == 1 ? "it" : "them";
    m += " back, or start a new run (another run.name and checkpoint.dir, or run.resume = never with "
         "output.overwrite = true)";
    throw UserError(m);
  }
  return accepted;
}

}  // namespace hone::rl
