// `hone tokenize`: text on stdin to token ids on stdout, and back with --decode.
//
//   hone tokenize --tokenizer DIR [--add-special] < text      ids separated by spaces, one line ending in "\n"
//   hone tokenize --tokenizer DIR --decode [--skip-special] < ids   the text, exact bytes, no newline added
//   --kind chars selects the built-in character tokenizer (no DIR needed).
// stdin is read byte for byte (nothing stripped); special-token text in it is matched as special tokens.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/command.h"
#include "runtime/error.h"
#include "tokenizer/tokenizer.h"

namespace hone {

namespace {

const char* const kUsage =
    "usage: hone tokenize --tokenizer DIR [--kind hf|chars] [--add-special] [--decode [--skip-special]]\n"
    "  Encodes the exact bytes of stdin and prints the token ids on one line, separated by spaces.\n"
    "  Special tokens written in the text (<|im_start|> ...) are matched as special tokens.\n"
    "  --tokenizer DIR   folder with tokenizer.json (and tokenizer_config.json)\n"
    "  --kind KIND       hf (default) or chars (the built-in character tokenizer; no DIR)\n"
    "  --add-special     add what the tokenizer's post-processor adds (BOS for Llama 3)\n"
    "  --decode          read whitespace-separated ids from stdin, print the text (no newline added)\n"
    "  --skip-special    with --decode: leave special tokens out\n";

std::string read_stdin() {
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) data.append(buf, n);
  HONE_USER_CHECK(!std::ferror(stdin), "tokenize: cannot read stdin");
  return data;
}

int run_tokenize(const std::vector<std::string>& args) {
  std::string dir, kind = "hf";
  bool add_special = false, decode = false, skip_special = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      HONE_USER_CHECK(i + 1 < args.size(), "tokenize: ", a, " needs a value (see hone tokenize --help)");
      return args[++i];
    };
    if (a == "--tokenizer") dir = value();
    else if (a == "--kind") kind = value();
    else if (a == "--add-special") add_special = true;
    else if (a == "--decode") decode = true;
    else if (a == "--skip-special") skip_special = true;
    else throw UserError(cat("tokenize: unknown argument '", a, "' (see hone tokenize --help)"));
  }
  HONE_USER_CHECK(kind != "hf" || !dir.empty(), "tokenize: --tokenizer DIR is required (see hone tokenize --help)");
  const auto tok = load_tokenizer(kind, dir);
  const std::string input = read_stdin();

  if (decode) {
    std::vector<TokenId> ids;
    std::istringstream in(input);
    std::string word;
    while (in >> word) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      HONE_USER_CHECK(used == word.size(), "tokenize --decode: '", word, "' is not a token id");
      HONE_USER_CHECK(v >= 0 && v < tok->vocab_size() && !tok->id_to_token(static_cast<TokenId>(v)).empty(),
                      "tokenize --decode: id ", word, " is not in the vocabulary (size ", tok->vocab_size(), ")");
      ids.push_back(static_cast<TokenId>(v));
    }
    const std::string text = tok->decode(ids, skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  const auto ids = tok->encode(input, add_special);
  std::string out;
  out.reserve(ids.size() * 7 + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

const CommandRegistration reg{{"tokenize", "text to token ids and back (--decode)", /*uses_mpi=*/false, &run_tokenize,
                               kUsage}};

}  // namespace

}  // namespace hone
