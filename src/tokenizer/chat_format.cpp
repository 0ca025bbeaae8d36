// Chat format rendering; each branch follows its jinja template statement by statement.
#include "tokenizer/chat_format.h"

#include <string_view>

#include "runtime/error.h"
#include "tokenizer/utf8.h"

namespace hone {

namespace {

// Python's str.strip(ch) / lstrip(ch) / rstrip(ch) for one character.
std::string_view lstrip_char(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}
std::string_view rstrip_char(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}
std::string_view strip_char(std::string_view s, char c) { return rstrip_char(lstrip_char(s, c), c); }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

std::string render_chatml(const std::vector<ChatMessage>& m, const ChatOptions& opt) {
  const size_t n = m.size();
  std::string out;
  if (m[0].role == "system") out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";
  // The last user turn that is not a tool response: assistant turns after it keep their reasoning.
  size_t last_query = n - 1;
  for (size_t k = n; k-- > 0;) {
    const auto& c = m[k].content;
    if (m[k].role == "user" && !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& msg = m[i];
    if (msg.role == "user" || (msg.role == "system" && i != 0)) {
      out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      std::string_view content = msg.content, reasoning;
      const size_t close = msg.content.find("</think>");
      if (close != std::string::npos) {
        const std::string_view all = msg.content;
        content = lstrip_char(all.substr(all.rfind("</think>") + 8), '\n');
        std::string_view before = rstrip_char(all.substr(0, close), '\n');
        const size_t open = before.rfind("<think>");
        if (open != std::string_view::npos) before = before.substr(open + 7);
        reasoning = lstrip_char(before, '\n');
      }
      if (i > last_query && (i == n - 1 || !reasoning.empty())) {
        out += "<|im_start|>" + msg.role + "\n<think>\n";
        out += strip_char(reasoning, '\n');
        out += "\n</think>\n\n";
        out += lstrip_char(content, '\n');
      } else {
        out += "<|im_start|>" + msg.role + "\n";
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (msg.role == "tool") {
      if (i == 0 || m[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + msg.content + "\n</tool_response>";
      if (i == n - 1 || m[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (opt.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (opt.enable_thinking.has_value() && !*opt.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string render_llama3(const std::vector<ChatMessage>& m, const ChatOptions& opt) {
  std::string out;
  for (size_t i = 0; i < m.size(); ++i) {
    if (i == 0) out += opt.bos_token;
    out += "<|start_header_id|>" + m[i].role + "<|end_header_id|>\n\n";
    out += tok::py_strip(m[i].content);  // jinja's trim filter is Python's str.strip()
    out += "<|eot_id|>";
  }
  if (opt.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

ChatFormat parse_chat_format(const std::string& name) {
  if (name == "auto") return ChatFormat::Auto;
  if (name == "none") return ChatFormat::None;
  if (name == "chatml") return ChatFormat::ChatML;
  if (name == "llama3") return ChatFormat::Llama3;
  throw UserError(cat("unknown chat format '", name, "' (allowed: auto, none, chatml, llama3)"));
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  HONE_USER_CHECK(!messages.empty(), "a chat needs at least one message");
  switch (format) {
    case ChatFormat::ChatML: return render_chatml(messages, options);
    case ChatFormat::Llama3: return render_llama3(messages, options);
    case ChatFormat::Auto: throw UserError("chat format \"auto\" needs the tokenizer's folder (ChatSetup)");
    case ChatFormat::None: break;
  }
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) out += (i ? "\n\n" : "") + messages[i].content;
  return out;
}

std::string render_chat(ChatFormat format, const std::string& system, const std::string& user,
                        bool add_generation_prompt) {
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", user});
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return render_chat(format, messages, options);
}

std::string chat_end_of_turn(ChatFormat format) {
  switch (format) {
    case ChatFormat::ChatML: return "<|im_end|>";
    case ChatFormat::Llama3: return "<|eot_id|>";
    case ChatFormat::Auto:
    case ChatFormat::None: break;
  }
  return "";
}

}  // namespace hone
