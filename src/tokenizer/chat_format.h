// Fixed chat formats: the text a model sees for a conversation, rendered exactly as the chat templates of the
// supported model families render plain messages (no tools). "auto" (the model's own template, chat_template.h)
// is resolved by ChatSetup (chat_setup.h); render_chat() itself knows only the fixed formats:
//   "chatml"  Qwen3's template (<|im_start|>role\n...<|im_end|>\n; earlier assistant turns lose their
//             <think> block; enable_thinking=false adds an empty <think></think> block to the generation prompt)
//   "llama3"  Llama 3.1's template as shipped in its tokenizer_config.json: <|begin_of_text|> once, then
//             <|start_header_id|>role<|end_header_id|>\n\n + content stripped of surrounding whitespace + <|eot_id|>.
//             That template prints no default system message and no date.
//   "none"    the message contents joined with "\n\n", nothing added (base models, synthetic tasks)
// The rendered text already holds the BOS of llama3: encode it with add_special=false.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hone {

enum class ChatFormat { None, ChatML, Llama3, Auto };

struct ChatMessage {
  std::string role;  // system | user | assistant (chatml also knows tool)
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;     // end with the opening of an assistant turn
  std::optional<bool> enable_thinking;   // chatml: unset or true = template default; false = empty think block
  std::string bos_token = "<|begin_of_text|>";  // llama3: written before the first message
};

// "auto" | "none" | "chatml" | "llama3"; hone::UserError naming the allowed values otherwise.
ChatFormat parse_chat_format(const std::string& name);

// Throws hone::UserError on an empty message list, and for Auto (which needs the tokenizer folder: ChatSetup).
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages, const ChatOptions& options = {});

// The common case: an optional system message (left out when empty) and one user message.
std::string render_chat(ChatFormat format, const std::string& system, const std::string& user,
                        bool add_generation_prompt = true);

// The token text that ends an assistant turn ("<|im_end|>", "<|eot_id|>"; "" for none): a stop string.
std::string chat_end_of_turn(ChatFormat format);

}  // namespace hone
