// JSONL prompt dataset (see dataset_jsonl.h).
#include "data/dataset_jsonl.h"

#include <algorithm>
#include <cmath>

#include "data/data_rng.h"
#include "runtime/activity.h"
#include "runtime/error.h"

namespace hone::data {

namespace {

const char* type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  return "an object";
}

// The literal text of the number a top-level key holds in a JSON line, as written: the JSON library keeps an integer
// past 64 bits only as a double (123456789012345678901234567890 became 1.2345678901234568e+29, and a correct answer
// was judged wrong).
class RawNumberOfKey : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit RawNumberOfKey(const std::string& key) : key_(key) {}
  std::string found;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t& s) override {
    if (depth_ == 1 && at_key_) found = s;
    at_key_ = false;
    return true;
  }
  bool string(string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t& k) override {
    at_key_ = depth_ == 1 && k == key_;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool scalar() {
    if (depth_ == 1) at_key_ = false;
    return true;
  }
  bool open() {
    if (depth_ == 1) at_key_ = false;
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  const std::string& key_;
  int depth_ = 0;
  bool at_key_ = false;
};

std::string answer_text(const nlohmann::json& v, const std::string& line, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (const double x = v.get<double>(); std::isfinite(x) && x == std::floor(x) && std::fabs(x) >= 9.2e18) {
    RawNumberOfKey raw(key);
    nlohmann::json::sax_parse(line, &raw);
    if (!raw.found.empty() && raw.found.find_first_of(".eE") == std::string::npos) return raw.found;
  }
  return v.dump();  // a float: shortest round-trip form
}

}  // namespace

Prompt prompt_from_record(const JsonlRecord& rec, const std::string& path, const DatasetOptions& options) {
  const std::string at = rec.where(path);
  HONE_USER_CHECK(rec.ok, at, ": ", rec.error);
  const nlohmann::json& j = rec.value;
  HONE_USER_CHECK(j.is_object(), at, ": expected a JSON object, got ", type_name(j));
  Prompt p;
  p.id = rec.line_number;
  p.source = at;
  auto field = j.find(options.prompt_key);
  HONE_USER_CHECK(field != j.end(), at, ": missing field '", options.prompt_key, "'");
  if (field->is_string()) {
    p.text = field->get<std::string>();
    p.messages.push_back({"user", p.text});
  } else if (field->is_array()) {
    for (size_t i = 0; i < field->size(); ++i) {
      const auto& m = (*field)[i];
      const std::string what = cat(at, ": field '", options.prompt_key, "' message ", i);
      HONE_USER_CHECK(m.is_object(), what, " must be an object {\"role\", \"content\"}, got ", type_name(m));
      auto role = m.find("role");
      auto content = m.find("content");
      HONE_USER_CHECK(role != m.end() && role->is_string(), what, " needs a string 'role'");
      HONE_USER_CHECK(content != m.end() && content->is_string(), what, " needs a string 'content'");
      std::string r = role->get<std::string>();
      HONE_USER_CHECK(r == "system" || r == "user" || r == "assistant", what, " has role '", r,
                      "'; allowed: system, user, assistant");
      p.messages.push_back({r, content->get<std::string>()});
    }
    HONE_USER_CHECK(!p.messages.empty(), at, ": field '", options.prompt_key, "' is an empty list of messages");
    for (size_t i = 0; i < p.messages.size(); ++i) p.text += (i ? "\n\n" : "") + p.messages[i].content;
  } else {
    throw UserError(cat(at, ": field '", options.prompt_key, "' must be a string or a list of messages, got ",
                        type_name(*field)));
  }
  HONE_USER_CHECK(!jsonl_line_is_blank(p.text), at, ": field '", options.prompt_key, "' is empty");
  if (!options.answer_key.empty()) {
    auto a = j.find(options.answer_key);
    HONE_USER_CHECK(a != j.end(), at, ": missing field '", options.answer_key, "'");
    HONE_USER_CHECK(a->is_string() || a->is_number(), at, ": field '", options.answer_key,
                    "' must be a string or a number, got ", type_name(*a));
    p.answer = answer_text(*a, rec.text, options.answer_key);
  }
  nlohmann::json extra = nlohmann::json::object();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != options.prompt_key && it.key() != options.answer_key) extra[it.key()] = it.value();
  p.extra_json = extra.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return p;
}

struct JsonlPromptDataset::Reader {
  explicit Reader(const std::string& path) : jsonl(path) {}
  JsonlReader jsonl;
};

JsonlPromptDataset::JsonlPromptDataset(const DatasetOptions& options, TokenCounter count_tokens) : options_(options) {
  HONE_USER_CHECK(!options_.path.empty(), "data.path is empty: name a JSONL file of prompts");
  HONE_USER_CHECK(!options_.prompt_key.empty(), "data.prompt_key is empty");
  HONE_USER_CHECK(options_.max_prompt_tokens >= 0, "data.max_prompt_tokens must be >= 0, got ",
                  options_.max_prompt_tokens);
  HONE_CHECK(options_.max_prompt_tokens == 0 || count_tokens, "max_prompt_tokens needs a token counter");
  const Activity activity(cat("reading the prompts in ", options_.path));
  reader_ = std::make_unique<Reader>(options_.path);
  JsonlRecord rec;
  while (reader_->jsonl.next(rec)) {
    ++stats_.lines;
    Prompt p;
    try {
      p = prompt_from_record(rec, options_.path, options_);
    } catch (const UserError&) {
      if (!options_.skip_bad_lines) throw;
      ++stats_.bad_lines;
      continue;
    }
    if (count_tokens) {
      int64_t n = 0;
      try {
        n = count_tokens(p);
      } catch (const UserError& e) {
        throw UserError(cat(p.source, ": ", e.what()));  // name the line whose prompt the tokenizer refused
      }
      if (options_.max_prompt_tokens > 0 && n > options_.max_prompt_tokens) {
        ++stats_.too_long;
        continue;
      }
      stats_.longest_prompt_tokens = std::max(stats_.longest_prompt_tokens, n);
    }
    lines_.push_back({rec.offset, rec.line_number});
  }
  stats_.usable = static_cast<int64_t>(lines_.size());
  HONE_USER_CHECK(stats_.lines > 0, options_.path, ": no prompts (the file is empty)");
  HONE_USER_CHECK(stats_.usable > 0, options_.path, ": no usable prompt among ", stats_.lines, " lines (",
                  stats_.bad_lines, " malformed, ", stats_.too_long, " longer than ",
                  options_.max_prompt_tokens_origin.empty()
                      ? cat("data.max_prompt_tokens = ", options_.max_prompt_tokens)
                      : cat(options_.max_prompt_tokens, " tokens: ", options_.max_prompt_tokens_origin),
                  ")");
}

JsonlPromptDataset::~JsonlPromptDataset() = default;

std::string JsonlPromptDataset::describe() const {
  return cat(options_.path, ": ", stats_.usable, " prompts (", stats_.lines, " lines, ", stats_.bad_lines,
             " malformed skipped, ", stats_.too_long, " over ", options_.max_prompt_tokens, " tokens dropped)");
}

Prompt JsonlPromptDataset::at(int64_t index) {
  HONE_CHECK(index >= 0 && index < stats_.usable, "prompt index ", index, " of ", stats_.usable);
  const LineRef& ref = lines_[static_cast<size_t>(index)];
  JsonlRecord rec;
  HONE_USER_CHECK(reader_->jsonl.read_at(ref.offset, ref.line_number, rec), options_.path, ":", ref.line_number,
                  ": the file changed while in use (line is gone)");
  try {
    return prompt_from_record(rec, options_.path, options_);
  } catch (const UserError& e) {
    throw UserError(cat(e.what(), " (the file changed while in use)"));
  }
}

const std::vector<int64_t>& JsonlPromptDataset::epoch_order(int64_t e) {
  if (order_epoch_ != e) {
    if (options_.shuffle) {
      order_ = permutation(stats_.usable, mix_keys(options_.seed, static_cast<uint64_t>(e), 0x5348554646ull));
    } else {
      order_.resize(static_cast<size_t>(stats_.usable));
      for (int64_t i = 0; i < stats_.usable; ++i) order_[i] = i;
    }
    order_epoch_ = e;
  }
  return order_;
}

std::vector<Prompt> JsonlPromptDataset::fetch(const std::vector<Place>& places) {
  std::vector<Prompt> out;
  out.reserve(places.size());
  for (const Place& pl : places) out.push_back(at(epoch_order(pl.epoch)[static_cast<size_t>(pl.position)]));
  return out;
}

}  // namespace hone::data
