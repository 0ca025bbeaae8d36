// JSON Lines reader and writer (see jsonl.h).
#include "io/jsonl.h"

#include <cerrno>
#include <cstring>

#include "io/json_nesting.h"
#include "runtime/error.h"

namespace hone {

std::string JsonlRecord::where(const std::string& path) const { return cat(path, ":", line_number); }

bool jsonl_line_is_blank(const std::string& text) {
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

void parse_jsonl_text(JsonlRecord& rec) {
  rec.value = nlohmann::json();
  rec.error.clear();
  if (std::string deep = json_nesting_error(rec.text); !deep.empty()) {
    rec.ok = false;
    rec.error = std::move(deep);
    return;
  }
  try {
    rec.value = nlohmann::json::parse(rec.text);
    rec.ok = true;
  } catch (const nlohmann::json::exception& e) {
    rec.ok = false;
    // nlohmann messages start with "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string msg = e.what();
    size_t bracket = msg.find("] ");
    if (msg.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) msg = msg.substr(bracket + 2);
    rec.error = "invalid JSON: " + msg;
  }
}

JsonlReader::JsonlReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  HONE_USER_CHECK(in_.is_open(), "cannot open '", path, "': ", std::strerror(errno));
}

bool JsonlReader::next(JsonlRecord& rec) {
  std::string line;
  while (true) {
    uint64_t start = offset_;
    if (!std::getline(in_, line)) {
      HONE_USER_CHECK(!in_.bad(), "error reading '", path_, "'");
      return false;
    }
    ++line_number_;
    offset_ += line.size() + (in_.eof() ? 0 : 1);
    if (jsonl_line_is_blank(line)) continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    rec.line_number = line_number_;
    rec.offset = start;
    rec.text = std::move(line);
    parse_jsonl_text(rec);
    return true;
  }
}

bool JsonlReader::read_at(uint64_t offset, int64_t line_number, JsonlRecord& rec) {
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  std::string line;
  if (!in_ || !std::getline(in_, line)) {
    in_.clear();
    return false;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  rec.line_number = line_number;
  rec.offset = offset;
  rec.text = std::move(line);
  parse_jsonl_text(rec);
  // Put the stream back where next() left it, so reading in order and by offset can be mixed.
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset_));
  return true;
}

JsonlWriter::JsonlWriter(const std::string& path, bool append)
    : path_(path), out_(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc)) {
  HONE_USER_CHECK(out_.is_open(), "cannot open '", path, "' for writing: ", std::strerror(errno));
}

void JsonlWriter::write(const nlohmann::json& value) {
  HONE_CHECK(out_.is_open(), "JsonlWriter for '", path_, "' is closed");
  out_ << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  ++lines_;
}

void JsonlWriter::flush() {
  out_.flush();
  HONE_USER_CHECK(out_.good(), "error writing '", path_, "'");
}

void JsonlWriter::close() {
  if (!out_.is_open()) return;
  out_.flush();
  bool good = out_.good();
  out_.close();
  HONE_USER_CHECK(good && !out_.fail(), "error writing '", path_, "'");
}

}  // namespace hone
