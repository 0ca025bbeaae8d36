// Resolving tokenizer.chat_format: auto picks the model's template, fixed formats are checked against the
// tokenizer's special tokens, and "none" with a chat model is said out loud once.
#include "tokenizer/chat_setup.h"

#include "runtime/error.h"
#include "runtime/log.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hone {

namespace {

// The special tokens a fixed format writes; a tokenizer without them would split them into ordinary text.
std::vector<std::string> format_tokens(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return {"<|im_start|>", "<|im_end|>"};
    case ChatFormat::Llama3: return {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
    default: return {};
  }
}

}  // namespace

ChatSetup::ChatSetup(const std::string& chat_format, const Tokenizer& tok, const std::string& dir) {
  format_ = parse_chat_format(chat_format);
  std::shared_ptr<const ChatTemplate> tpl = ChatTemplate::load(dir);
  if (format_ == ChatFormat::Auto) {
    format_ = ChatFormat::None;
    if (tpl) {
      // Render a probe prompt now so that a template hone cannot follow fails before the run starts. Only a user
      // turn: some templates refuse a system message, which matters only if the data or deck has one.
      HONE_USER_CHECK(!tpl->render({{"user", "u"}}).empty(), tpl->origin(),
                      ": the chat template renders nothing for a user message (an empty template, or one whose output "
                      "is empty), so every prompt would be empty; fix it or set tokenizer.chat_format");
      tpl_ = std::move(tpl);
      end_of_turn_ = tpl_->end_of_turn(tok);
      if (end_of_turn_.empty())
        log_warn(tpl_->origin(), ": the chat template ends an assistant turn with no special token of the tokenizer, "
                 "so generation stops only at the tokenizer's end-of-sequence token or generation.stop_strings");
      ChatOptions with, without;
      with.add_generation_prompt = true;
      without.add_generation_prompt = false;
      if (tpl_->render({{"user", "u"}}, with) == tpl_->render({{"user", "u"}}, without))
        log_warn(tpl_->origin(), ": the chat template writes no generation prompt (add_generation_prompt changes "
                 "nothing), so the model starts its reply without an assistant header");
    }
    return;
  }
  if (format_ == ChatFormat::None) {
    if (tpl)
      log_warn("tokenizer.chat_format = \"none\": prompts are fed as plain text although ", tpl->origin(),
               " has a chat template (\"auto\" renders it)");
    return;
  }
  for (const std::string& t : format_tokens(format_)) {
    const TokenId id = tok.token_to_id(t);
    HONE_USER_CHECK(id >= 0 && tok.is_special(id), "tokenizer.chat_format = \"", chat_format, "\": the tokenizer",
                    dir.empty() ? std::string() : " in " + dir, " has no special token ", t,
                    ", so it is not a ", chat_format, " model (\"auto\" uses the model's own chat template)");
  }
  end_of_turn_ = chat_end_of_turn(format_);
}

std::string ChatSetup::render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  if (tpl_) {
    std::string text = tpl_->render(messages, options);
    HONE_USER_CHECK(!text.empty(), tpl_->origin(), ": the chat template renders an empty prompt for a conversation "
                    "of ", messages.size(), " messages; fix it or set tokenizer.chat_format");
    return text;
  }
  return render_chat(format_, messages, options);
}

std::string ChatSetup::describe() const {
  if (tpl_) return "the chat template of " + tpl_->origin();
  switch (format_) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama3: return "llama3";
    default: return "none (prompt text as is)";
  }
}

}  // namespace hone
