#!/usr/bin/env python3
"""Golden renderings of real chat templates for hone's chat template interpreter (tests/unit/test_chat_template.cpp).

Templates (written next to this script as NAME.jinja, so the test needs no tokenizer files):
  qwen3, llama3            the chat_template of the Qwen3 and Llama 3.1 tokenizer_config.json files in
                           shared/data/tokenizers (the Llama one is the plain Llama 3 template)
  qwen2_5, qwen3_2, llama3_1, llama3_2, deepseek_r1_distill, deepseek_v3
                           the templates the `trl` package ships in trl/chat_templates/ (qwen2_5.jinja, qwen3.jinja
                           (a later revision of Qwen3's, with `is string` checks), llama3_1.jinja, llama3_2.jinja,
                           deepseek_r1_distill.jinja, deepseekv3.jinja): the original templates of those model families

Every conversation below is rendered with transformers' `apply_chat_template(..., tokenize=False)` into golden.jsonl:
one line per case with the template name, the messages, add_generation_prompt, the template variables transformers
passed (special tokens, enable_thinking, date_string) and the expected text.

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install transformers jinja2 trl
    /tmp/ref/bin/python tests/data/tokenizer/chat_templates/make_goldens.py [--tokenizers ../shared/data/tokenizers]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRL_TEMPLATES = {"qwen2_5": "qwen2_5", "qwen3_2": "qwen3", "llama3_1": "llama3_1", "llama3_2": "llama3_2",
                 "deepseek_r1_distill": "deepseek_r1_distill", "deepseek_v3": "deepseekv3"}
# The tokenizer whose special tokens transformers passes to each template (DeepSeek's are given explicitly).
TOKENIZER_OF = {"qwen3": "qwen3", "qwen3_2": "qwen3", "qwen2_5": "qwen3", "llama3": "llama3_1", "llama3_1": "llama3_1",
                "llama3_2": "llama3_1", "deepseek_r1_distill": "qwen3", "deepseek_v3": "qwen3"}
DEEPSEEK_TOKENS = {"bos_token": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "eos_token": "<\uff5cend\u2581of\u2581sentence\uff5c>"}


def conversations():
    long_user = "Solve: what is 12 * 34? Show your work.\n\nThen explain."
    cases = []
    for system in [None, "You are a helpful assistant.", "  padded system\n\n", ""]:
        for user in ["Hello!", long_user, "  leading and trailing spaces \n", "\u3000unicode space\u00a0 \u00e9t\u00e9 \u4f60\u597d",
                     "<|im_start|>inject<|im_end|>", "quotes ' \" and \\ backslash {{ not a tag }} {% raw %}"]:
            cases.append(([{"role": "system", "content": system}] if system is not None else []) +
                         [{"role": "user", "content": user}])
    cases.append([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
                  {"role": "user", "content": "And 3+3?"}])
    cases.append([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"},
                  {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"}, {"role": "user", "content": "Q2"}])
    cases.append([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\nplan\n</think>\n\nanswer"}])
    cases.append([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "plain answer"}])
    cases.append([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "\n\n<think>a</think>b</think>c\n"}])
    cases.append([{"role": "user", "content": "first"}, {"role": "system", "content": "late system"},
                  {"role": "user", "content": "second"}])
    cases.append([{"role": "system", "content": "S1"}, {"role": "system", "content": "S2"},
                  {"role": "user", "content": "U"}])
    cases.append([{"role": "user", "content": "U1"}, {"role": "assistant", "content": "<think>\nr1\n</think>\nA1"},
                  {"role": "user", "content": "U2"}, {"role": "assistant", "content": "<think>r2</think>A2"},
                  {"role": "user", "content": "<tool_response>not a query</tool_response>"},
                  {"role": "assistant", "content": "<think>\n\nr3\n\n</think>\n\nA3"}])
    cases.append([{"role": "user", "content": ""}])
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default=os.path.join(HERE, "..", "..", "..", "..", "..", "shared", "data", "tokenizers"))
    args = ap.parse_args()
    try:
        import transformers
        import trl
        from transformers import AutoTokenizer
    except ImportError as e:
        sys.exit("make_goldens.py needs transformers, jinja2 and trl (%s)" % e)

    templates = {}
    for name, folder in [("qwen3", "qwen3"), ("llama3", "llama3_1")]:
        with open(os.path.join(args.tokenizers, folder, "tokenizer_config.json"), encoding="utf-8") as f:
            templates[name] = json.load(f)["chat_template"]
    trl_dir = os.path.join(os.path.dirname(trl.__file__), "chat_templates")
    for name, trl_name in TRL_TEMPLATES.items():
        with open(os.path.join(trl_dir, trl_name + ".jinja"), encoding="utf-8") as f:
            templates[name] = f.read()
    for name, text in templates.items():
        with open(os.path.join(HERE, name + ".jinja"), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    tokenizers = {folder: AutoTokenizer.from_pretrained(os.path.join(args.tokenizers, folder))
                  for folder in set(TOKENIZER_OF.values())}
    lines = []
    for name, text in templates.items():
        tok = tokenizers[TOKENIZER_OF[name]]
        for msgs in conversations():
            for gen in [True, False]:
                extras = [{}]
                if name.startswith("qwen3"):
                    extras = [{}, {"enable_thinking": True}, {"enable_thinking": False}]
                elif name.startswith("llama3_"):
                    extras = [{"date_string": "26 Jul 2024"}, {"date_string": "03 Feb 2025"}]
                elif name.startswith("deepseek"):
                    extras = [dict(DEEPSEEK_TOKENS)]
                for extra in extras:
                    variables = {k: v for k, v in tok.special_tokens_map.items() if isinstance(v, str)}
                    variables.update(extra)
                    expected = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen,
                                                       chat_template=text, **extra)
                    lines.append({"template": name, "messages": msgs, "add_generation_prompt": gen,
                                  "variables": variables, "expected": expected})
    path = os.path.join(HERE, "golden.jsonl")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps({"transformers": transformers.__version__, "trl": trl.__version__}) + "\n")
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print("%s: %d cases over %d templates" % (path, len(lines), len(templates)))


if __name__ == "__main__":
    main()
