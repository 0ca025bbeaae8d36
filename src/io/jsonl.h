// JSON Lines files: a streaming reader that yields (line number, parsed value or parse error) one line at a time,
// random access to a line by its byte offset, and a writer. Used by prompt datasets and by commands that read or
// write one JSON object per line (e.g. {"tokens": [...]}).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace hone {

// One non-blank line of a JSONL file. Blank lines (only spaces, tabs, CR) are not records and are skipped.
struct JsonlRecord {
  int64_t line_number = 0;  // 1-based line number in the file
  uint64_t offset = 0;      // byte offset of the line's first character
  std::string text;         // the raw line without its newline (and without a trailing CR)
  bool ok = false;          // true when text parsed as JSON
  nlohmann::json value;     // the parsed value when ok
  std::string error;        // the parse error when !ok (one line, without file or line number)

  // "path:line": the prefix of every message about this record.
  std::string where(const std::string& path) const;
};

// Reads a JSONL file line by line; never holds more than one line in memory.
class JsonlReader {
 public:
  explicit JsonlReader(const std::string& path);  // UserError when the file cannot be opened

  // Reads the next non-blank line into rec. Returns false at end of file. A line that is not valid JSON is
  // returned with ok == false and the error; it does not throw.
  bool next(JsonlRecord& rec);

  // Reads the line that starts at byte offset (as returned in JsonlRecord::offset); line_number is stored as given.
  // Returns false when the offset is past the end of the file.
  bool read_at(uint64_t offset, int64_t line_number, JsonlRecord& rec);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_number_ = 0;
  uint64_t offset_ = 0;
};

// Parses one line's text into rec (sets ok, value, error). Leading/trailing whitespace is allowed.
void parse_jsonl_text(JsonlRecord& rec);

// True when the line holds nothing but spaces, tabs or CR.
bool jsonl_line_is_blank(const std::string& text);

// Writes one JSON value per line. Non-UTF-8 bytes in strings are replaced (U+FFFD) rather than throwing.
class JsonlWriter {
 public:
  // Opens path for writing (truncate, or append when append is true). UserError when it cannot be opened.
  explicit JsonlWriter(const std::string& path, bool append = false);
  void write(const nlohmann::json& value);
  void flush();
  void close();  // flushes and closes; UserError when the data could not be written
  int64_t lines_written() const { return lines_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  int64_t lines_ = 0;
};

}  // namespace hone
