// The deck's tokenizer.chat_format resolved against the tokenizer in use: "auto" takes the model's own chat template
// when its folder has one (and the prompt text as is otherwise); a fixed format must match the tokenizer's special
// tokens. What the trainer renders every prompt with, and the end-of-turn token it stops on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat_format.h"

namespace hone {

class ChatTemplate;
class Tokenizer;

class ChatSetup {
 public:
  ChatSetup() = default;  // "none"
  // chat_format: the deck value (auto | chatml | llama3 | none); dir: the tokenizer folder ("" for chars).
  // Throws UserError for a fixed format the tokenizer cannot encode or a template hone cannot render.
  ChatSetup(const std::string& chat_format, const Tokenizer& tok, const std::string& dir);

  bool is_chat() const { return tpl_ != nullptr || format_ != ChatFormat::None; }
  std::string render(const std::vector<ChatMessage>& messages, const ChatOptions& options = {}) const;
  const std::string& end_of_turn() const { return end_of_turn_; }  // "" when none
  // "the chat template of <file>", "chatml", "none": for the run header.
  std::string describe() const;

 private:
  ChatFormat format_ = ChatFormat::None;
  std::shared_ptr<const ChatTemplate> tpl_;
  std::string end_of_turn_;
};

}  // namespace hone
