#!/usr/bin/env python3
"""Golden renderings of real chat templates for hone's chat template interpreter (tests/unit/test_chat_template.cpp).

Templates (written next to this script as NAME.jinja, so the test needs no tokenizer files):
  qwen3, llama3            the chat_template of the Qwen3 and Llama 3.1 tokenizer_config.json files in
                           shared/data/tokenizers (the Llama one is the plain Llama 3 template)
  qwen2_5, qwen3_2, llama3_1, llama3_2, deepseek_r1_distill, deepseek_v3
                           the templates the `trl` package ships in trl/chat_templates/ (qwen2_5.jinja, qwen3.jinja
                           (a later revision of Qwen3's, with `is string` checks), llama3_1.jinja, llama3_2.jinja,
                           deepseek_r1_distill.jinja, deepseekv3.jinja): the original templates of those model families

FEATURES below are small templates for single jinja features, rendered the same way into features.jsonl.

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


# Small templates for the jinja features the real ones use or could use, rendered the same way into features.jsonl:
# whitespace control, scoping, loop variables, operators, Python's str() of values, filters, tests, str methods.
FEATURES = [
    "a\n  {% if true %}\n    b\n  {% endif %}\n  c\n",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "x {{- ' y ' -}} z\n{{ 'w' }}\n{# note #}\n  {#- note -#}  v {%+ if true %}+{% endif +%}\nq",
    "{% for m in messages %}\n  [{{ loop.index }}/{{ loop.length }} {{ loop.index0 }} {{ loop.revindex }} {{ loop.first }} {{ loop.last }}]\n{% endfor %}",
    "{% for m in [1, 2, 3] %}{% if loop.first %}{% set x = 5 %}{% endif %}[{{ x }}]{% endfor %}{{ x }}",
    "{% set x = 1 %}{% for m in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
    "{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}",
    "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for x in [] %}no{% else %}empty{% endfor %}{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}",
    "{% for k, v in {'b': 1, 'a': [2, 'x']} | items %}{{ k }}={{ v }};{% endfor %}{% for k in {'p': 1, 'q': 2} %}{{ k }}{% endfor %}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 1e16 }} {{ 2.5e15 }} {{ -0.0 }} {{ 3 - 1.5 }}",
    "{{ none }} {{ true }} {{ [1, 'a', none, true, 1.5, [\"it's\"]] }} {{ {'k': 'v', 'n': none} }} {{ 'a' ~ 1 ~ none ~ undefined_thing }}",
    "{{ 'abc'[::-1] }} {{ 'h\u00e9llo'[1:3] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3, 4][-2] }} {{ 'h\u00e9'|length }} {{ [1, 2][5] is defined }} {{ messages[0].role }} {{ messages[0]['content'] }}",
    "{{ 1 if true else 2 }} {{ 1 if false }}|{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ 3 > 2 > 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 2 not in [1, 3] }}",
    "{{ u is defined }} {{ u is undefined }} {{ none is none }} {{ 'x' is string }} {{ 1 is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.5 is float }} {{ {} is mapping }} {{ 'x' is iterable }} {{ [] is sequence }} {{ false is false }} {{ 0 is false }} {{ true is true }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 1 is eq 1 }} {{ 'a' is equalto 'a' }} {{ u is not defined }}",
    "[{{ '  a b \\n' | trim }}] [{{ 'xxayxx' | trim('x') }}] {{ 'AbC' | lower }} {{ 'abC' | upper }} {{ 'hello world' | capitalize }} {{ 'hello world' | title }} {{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ [3, 1, 2] | sort }} {{ [1, 2, 2, 1] | unique | list }} {{ [1, 2] | reverse | list }} {{ 'ab' | list }} {{ [4, 5] | first }} {{ [4, 5] | last }} {{ u | default('dflt') }} {{ '' | default('e', true) }} {{ 'aXbX' | replace('X', '-') }} {{ -3 | abs }} {{ '42' | int + 1 }} {{ '2.5' | float }} {{ 5 | string }} {{ [1, 2] | length }} {{ u | length }} [{{ u | trim }}]",
    "{{ ['a', 'b', 'c'] | reject('equalto', 'b') | list }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | map(attribute='role') | join(',') }} {{ messages | rejectattr('role', 'equalto', 'user') | list }}",
    "{{ {'a': 1, 'b': [1, 2.5, none, true, 'q\"\\n\u00e9']} | tojson }} {{ {'b': 1, 'a': {'c': []}} | tojson(indent=2) }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ 'x' | tojson }} {{ {} | tojson }}",
    "{{ 'a,b,,c'.split(',') }} {{ '  a  b  '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a<think>b'.split('<think>')[-1] }} {{ '\\n\\nx\\n'.strip('\\n') }} {{ '  x  '.lstrip() }}| {{ 'xyx'.rstrip('x') }} {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'Ab'.lower() }} {{ 'Ab'.upper() }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }} {{ '-'.join(['x', 'y']) }} {{ {'k': 1}.get('k') }} {{ {'k': 1}.get('z', 'd') }} {{ {'k': 1}.keys() | list }} {{ {'k': 1}.values() | list }}",
    "{% set greeting %}Hi {{ messages[0].role }}{% endset %}{{ greeting | upper }} {% set t = 'x' %}{{ t * 3 }} {{ [1] * 2 }} {{ 'a' 'b' }} {{ \"q\\t\\u00e9\\x41\\101\\z\" }} {{ (1, 2) }} {{ [] }} {{ dict(a=1) }} {{ namespace(a=1).a }}",
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system = messages[0]['content'] | trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system = 'none' %}\n{%- endif %}\n{{- system }}|{{ messages | length }}\n{%- for m in messages %}{% generation %}<{{ m.role }}>{% endgeneration %}{% endfor %}",
]


def write_features(tok, add_generation_prompt=False):
    msgs = [{"role": "system", "content": "  Sys  "}, {"role": "user", "content": "U1"},
            {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]
    lines = []
    for text in FEATURES:
        expected = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=add_generation_prompt,
                                           chat_template=text)
        lines.append({"template": text, "messages": msgs, "expected": expected})
    path = os.path.join(HERE, "features.jsonl")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print("%s: %d cases" % (path, len(lines)))


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
    write_features(tokenizers["qwen3"])


if __name__ == "__main__":
    main()
