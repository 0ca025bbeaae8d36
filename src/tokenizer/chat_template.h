// A model's own chat template: the jinja "chat_template" of its tokenizer_config.json (or chat_template.jinja),
// parsed once by hone's jinja interpreter (jinja_*.h) and rendered for every prompt the way transformers'
// apply_chat_template(messages, tokenize=False) renders it: the special tokens of tokenizer_config.json as
// bos_token/eos_token/..., no tools, add_generation_prompt and enable_thinking from the options.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat_format.h"
#include "tokenizer/jinja_ast.h"

namespace hone {

class Tokenizer;

class ChatTemplate {
 public:
  // origin names where the text came from in error messages. Throws UserError ("<origin>: chat template line N:
  // ...") for a template outside the subset hone renders.
  ChatTemplate(const std::string& source, std::string origin, jinja::Dict special_tokens = {});

  // The template of a tokenizer folder (chat_template.jinja first, as transformers 5.x writes and reads it, then
  // the tokenizer_config.json entry, the "default" one of a named list, then chat_template.json of older
  // processors); nullptr when the folder has none. The special tokens come from tokenizer_config.json and
  // special_tokens_map.json.
  static std::unique_ptr<ChatTemplate> load(const std::string& dir);

  // Throws UserError naming the origin and template line when rendering fails (raise_exception included).
  std::string render(const std::vector<ChatMessage>& messages, const ChatOptions& options = {},
                     const jinja::Dict& extra_variables = {}) const;

  // The special token that closes an assistant turn (<|im_end|>, <|eot_id|>, <｜end▁of▁sentence｜>): the
  // longest special token text right after the assistant's content in a rendered two-turn chat; "" if none.
  std::string end_of_turn(const Tokenizer& tok) const;

  const std::string& origin() const { return origin_; }

 private:
  jinja::Body body_;
  std::string origin_;
  jinja::Dict special_tokens_;
};

}  // namespace hone
