#!/usr/bin/python3
"""Builds the tokenizer parity corpus: tests/data/tokenizer/corpus.jsonl.

Needs only the Python standard library. The output is deterministic (fixed seed) and committed; the golden ids
are made from it by tools/tokenizer_reference.py. One JSON object per line:
  {"text": "..."}        text to encode (any Unicode, including special-token strings)
  {"hex": "e4b8..."}     raw bytes that are not valid UTF-8; Hugging Face receives bytes.decode("utf-8", "replace")

usage: tools/tokenizer_corpus.py [--out tests/data/tokenizer/corpus.jsonl]
"""
import argparse
import json
import os
import random
import unicodedata

PROSE = [
    "The quick brown fox jumps over the lazy dog. It wasn't the first time, and it won't be the last.",
    "Reinforcement learning from verifiable rewards trains a policy on problems whose answers can be checked.",
    "She said, \"I'll be there at 10:30 a.m.\" -- but she'd already left by then; we're not sure why.",
    "In 1969, Apollo 11 landed on the Moon. Neil Armstrong's words were: 'That's one small step for man.'",
    "GRPO samples a group of completions per prompt and normalizes each reward by the group's mean and std.",
    "Mr. O'Neil's dog ISN'T HERE. THEY'LL BE BACK. You'VE been WARNED, haven't you? I'M sure He'D agree.",
    "Rain, sleet, snow... whatever! The mail--mostly bills--arrived anyway (as usual) [citation needed].",
    "E-mail me at someone@example.com or visit https://example.org/path/to/page?query=1&lang=en#section-2.",
    "Well-known, state-of-the-art, long-term: hyphenated words are everywhere; so are semi-colons; and colons:",
    "A man, a plan, a canal: Panama!  Two spaces after a period.   Three here.    And four.",
    "Tokenizers split text into pieces; byte-level BPE never fails, because every byte is in the vocabulary.",
    "The café served crème brûlée, jalapeño poppers and a smörgåsbord; the naïve coöperative façade fell.",
    "Straße, Ærøskøbing, Łódź, Dvořák, Ångström, İstanbul, ſtrange long s, ǅ title case, ﬁ ligature.",
    "\"Quotes\" ‘single’ “double” «guillemets» „German“ — em dash – en dash … ellipsis • bullet · middle dot",
    "Prices: $5, €10.50, £3, ¥1000, ₹250, ₿0.001; 50% off; 3×4=12; 10÷2=5; ±0.5; ≤ ≥ ≠ ≈ ∞ √2 π ∑ ∫",
    "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #!@. lowercase sentence. MiXeD CaSe SeNtEnCe.",
]

CODE = [
    "def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\nif __name__ == '__main__':\n    print([fibonacci(i) for i in range(10)])\n",
    "#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tfor (int i = 0; i < argc; ++i) {\n\t\tprintf(\"%d: %s\\n\", i, argv[i]);\n\t}\n\treturn 0;\n}\n",
    "template <typename T>\nstd::vector<T> softmax(const std::vector<T>& x) {\n  T m = *std::max_element(x.begin(), x.end());\n  std::vector<T> y(x.size());\n  T s = 0;\n  for (size_t i = 0; i < x.size(); ++i) s += (y[i] = std::exp(x[i] - m));\n  for (auto& v : y) v /= s;\n  return y;\n}\n",
    "fn main() {\n    let v: Vec<u32> = (1..=10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n    match v.get(3) {\n        Some(&n) if n > 5 => println!(\"big {n}\"),\n        _ => {}\n    }\n}\n",
    "function debounce(fn, ms) {\n  let t;\n  return (...args) => {\n    clearTimeout(t);\n    t = setTimeout(() => fn.apply(this, args), ms);\n  };\n}\nconst x = {a: 1, 'b-c': [1, 2, 3], d: null};\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tch := make(chan int, 3)\n\tgo func() { for i := 0; i < 3; i++ { ch <- i } ; close(ch) }()\n\tfor v := range ch {\n\t\tfmt.Println(v)\n\t}\n}\n",
    "SELECT u.id, u.name, COUNT(o.id) AS orders\nFROM users u\nLEFT JOIN orders o ON o.user_id = u.id\nWHERE u.created_at >= '2024-01-01'\nGROUP BY u.id, u.name\nHAVING COUNT(o.id) > 3\nORDER BY orders DESC;\n",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  if [[ -s \"$f\" ]]; then\n    wc -l \"$f\" | awk '{print $1}'\n  fi\ndone 2>/dev/null || echo \"none\" >&2\n",
    "<!DOCTYPE html>\n<html lang=\"en\">\n  <head><meta charset=\"utf-8\"><title>Test &amp; check</title></head>\n  <body>\n    <div class=\"a b\" id='x'>&lt;tag&gt; &#169; &nbsp;</div>\n  </body>\n</html>\n",
    "    if (x) {\n        return;\n    }\n\n        deeply_indented();\n            even_more();\n\t\tmixed_tabs();\n  \t  tab_and_space();\n",
    "public class Hello {\n    public static void main(String[] args) {\n        System.out.println(\"Hello, \" + args.length + \" args\");\n    }\n}\n",
    "import numpy as np\nx = np.linspace(0, 1, 101)\ny = np.sin(2 * np.pi * x) ** 2  # squared\nassert abs(y.mean() - 0.5) < 1e-2, f\"mean={y.mean():.4f}\"\n",
    "(defun fact (n)\n  (if (<= n 1) 1 (* n (fact (- n 1)))))\n;; comment: (fact 20) => 2432902008176640000\n",
    "x <- c(1, 2, 3)\nmean(x); sd(x)\nlibrary(ggplot2)\nggplot(df, aes(x=a, y=b)) + geom_point()\n",
]

LATEX = [
    r"\begin{align} \int_0^\infty e^{-x^2}\,dx &= \frac{\sqrt{\pi}}{2} \\ \sum_{n=1}^{\infty} \frac{1}{n^2} &= \frac{\pi^2}{6} \end{align}",
    r"Let $f(x) = ax^2 + bx + c$. Then $x = \frac{-b \pm \sqrt{b^2 - 4ac}}{2a}$, so the answer is \boxed{42}.",
    r"$$\mathbf{A}^{-1} = \frac{1}{\det(\mathbf{A})} \operatorname{adj}(\mathbf{A}), \quad \nabla \cdot \vec{E} = \frac{\rho}{\varepsilon_0}$$",
    r"\lim_{x \to 0} \frac{\sin x}{x} = 1, \qquad \binom{n}{k} = \frac{n!}{k!(n-k)!}, \qquad e^{i\pi} + 1 = 0",
    r"The probability is $P(A \mid B) = \frac{P(B \mid A) P(A)}{P(B)} \approx 0.173$; thus \(\hat{\theta}_{\text{MLE}} = \bar{x}\).",
    r"\documentclass{article}\usepackage{amsmath}\begin{document}\section*{Proof}Assume $n \geq 2$.\end{document}",
]

SCRIPTS = [
    "机器学习是人工智能的一个分支。强化学习通过奖励信号来训练模型，使其在环境中做出更好的决策。",
    "今天天气很好，我们去公园散步吧！你觉得怎么样？（括号）【方括号】《书名号》——破折号……省略号",
    "日本語のテキストも正しく処理する必要があります。ひらがな、カタカナ、漢字が混在しています。ｶﾀｶﾅ半角",
    "東京都渋谷区で開催された会議には、約１２０名が参加しました。次回は２０２５年４月の予定です。",
    "한국어 문장도 포함합니다. 토크나이저는 모든 언어를 올바르게 처리해야 합니다. 감사합니다!",
    "العربية لغة جميلة. التعلم المعزز يستخدم المكافآت لتدريب النماذج. مرحبا بالعالم ١٢٣٤٥٦٧٨٩٠",
    "עברית נכתבת מימין לשמאל. שלום עולם! המספרים 123 נכתבים משמאל לימין.",
    "Русский язык: съешь же ещё этих мягких французских булок, да выпей чаю. Ёлка, йод, ЩИ.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Αλφάβητο: αβγδεζηθικλμνξοπρστυφχψω ΆΈΉΊΌΎΏ.",
    "हिन्दी: मशीन लर्निंग कृत्रिम बुद्धिमत्ता की एक शाखा है। संख्याएँ: १२३४५६७८९०। क्षत्रिय, ज्ञान, श्री।",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ การเรียนรู้ของเครื่องเป็นสาขาหนึ่งของปัญญาประดิษฐ์ ๑๒๓",
    "Tiếng Việt có nhiều dấu: Trường Đại học Bách khoa Hà Nội, người Việt, ướt át, ỷ lại.",
    "Türkçe: Işık, ığdır, şoför, çağrı, ÖZGÜR, İSTANBUL. Polski: zażółć gęślą jaźń. Čeština: příliš žluťoučký kůň.",
    "ქართული ენა, Հայերեն լեզու, አማርኛ ቋንቋ, ᠮᠣᠩᠭᠣᠯ, ꦗꦮ, தமிழ் மொழி, తెలుగు, ಕನ್ನಡ, മലയാളം, বাংলা, ગુજરાતી, ਪੰਜਾਬੀ, සිංහල, བོད་ཡིག, ខ្មែរ, ລາວ, မြန်မာ",
]

EMOJI = [
    "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 🏳️‍🌈 flag, 🇺🇸🇯🇵🇩🇪🇫🇷 flags, 👍🏻👍🏼👍🏽👍🏾👍🏿 tones, ❤️‍🔥 heart on fire",
    "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘 🧑‍🚀🧑🏿‍🦰 🫠🫶🏼 🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland, keycaps 1️⃣#️⃣*️⃣, ☺︎ vs ☺️",
    "Check ✅ cross ❌ warning ⚠️ star ⭐ sparkles ✨ rocket 🚀 fire 🔥 100 💯 — done 🎉🎊",
]

# Decomposed forms: NFC changes these (Qwen3 normalizes with NFC).
COMBINING = [
    "Cafe\u0301 re\u0301sume\u0301 nai\u0308ve A\u030angstro\u0308m n\u0303 o\u0302 u\u0308ber",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af (Hangul jamo, compose to syllables)",
    "e\u0301\u0301\u0301 multiple marks; a\u0328\u0301 ogonek+acute; \u0915\u093c (nukta); Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333",
    "\u212b Angstrom sign, \u2126 Ohm sign, \u00c5 precomposed, \u0041\u030a decomposed, \u1e9b\u0323 long s dot",
    "\u0627\u0653 \u05e9\u05c1\u05b8 \u0e01\u0e33 \u0dd9\u0dcf \u0b47\u0b3e combining in scripts",
]

SPECIAL = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "text<|endoftext|>more text<|end_of_text|> and <|im_sta partial <|im_end and <| im_start |> spaced <|im_start|<|im_start|>>",
    "<think>\nreasoning here\n</think>\n\nanswer <tool_call>{\"name\": \"f\"}</tool_call> <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "<|reserved_special_token_5|><|reserved_special_token_250|><|python_tag|><|eom_id|><|finetune_right_pad_id|>",
    "<<|im_start|>> <|<|endoftext|>|> <|endoftext|><|endoftext|><|endoftext|> x<|im_end|>y <|IM_START|> <|endoftext|",
]

WORDS = ("the of and to in is was for on are with as at by be this have from or one had not but what all were "
         "when we there can an your which their said if do will each about how up out them then she many some so "
         "these would other into has more her two like him see time could no make than first been its who now "
         "people my made over did down only way find use may water long little very after words called just where "
         "most know get through back much before go good new write our used me man too any day same right look "
         "think also around another came come work three word must because does part even place well such").split()


def numbers(rng):
    out = []
    for n in range(1, 41):
        out.append("".join(rng.choice("0123456789") for _ in range(n)))
    out += ["1,000", "1,234,567.89", "3.14159265358979", "-42", "+7", "1e-10", "6.022e23", "0x1F", "0b1011",
            "2024-06-30", "12:34:56", "192.168.0.1", "1/2", "3/4", "v1.2.3", "10^6", "1_000_000", "007", "٣٤٥",
            "１２３４５", "Ⅻ", "½", "²³", "12th", "1st", "2nd", "$1.5M", "99.9%", "(555) 123-4567"]
    rng.shuffle(out)
    return " ".join(out)


def whitespace(rng):
    pieces = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", " \t ", "\u00a0", "\u3000",
              "\u2003", "\u2028", "\u0085", "\x0b", "\x0c", "\u200b", "\u1680", "\u202f", "\u205f", "\u180e"]
    return "".join(rng.choice(pieces) + rng.choice(WORDS + ["", "", "."]) for _ in range(40))


def long_words(rng):
    out = ["a" * 300, "ab" * 200, "Pneumonoultramicroscopicsilicovolcanoconiosis",
           "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
           "x" * 1000 + "y", "0" * 500, "!" * 200, "-=" * 100, " " * 500, "\n" * 100, "ё" * 200, "中" * 300,
           "😀" * 100, "_" * 300 + "init" + "_" * 300,
           "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(2000))]
    return out


def urls_json(rng):
    out = ["https://www.example.com/a/b/c.html?x=1&y=%20z#frag", "ftp://user:pass@host:21/file.tar.gz",
           "file:///home/user/My%20Documents/report.pdf", "mailto:a.b+c@sub.example.co.uk",
           "https://ja.wikipedia.org/wiki/東京", "http://[2001:db8::1]:8080/path"]
    obj = {"id": 17, "name": "Ünïcödé", "tags": ["a", "b", "c"], "nested": {"x": [1.5, -2, 3e8], "ok": True,
           "none": None}, "text": "line1\nline2\t\"quoted\""}
    out.append(json.dumps(obj))
    out.append(json.dumps(obj, indent=2, ensure_ascii=False))
    out.append(json.dumps([{"k%d" % i: i * i} for i in range(20)], separators=(",", ":")))
    return out


def mixture(rng, n_words):
    pools = PROSE + CODE + LATEX + SCRIPTS + EMOJI + COMBINING + SPECIAL
    out = []
    for _ in range(n_words):
        r = rng.random()
        if r < 0.6:
            w = rng.choice(WORDS)
            if rng.random() < 0.1:
                w = w.capitalize()
            elif rng.random() < 0.03:
                w = w.upper()
            out.append(w)
        elif r < 0.75:
            out.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        elif r < 0.85:
            out.append(rng.choice(".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`"))
        elif r < 0.95:
            src = rng.choice(pools)
            a = rng.randrange(len(src))
            out.append(src[a:a + rng.randint(1, 30)])
        else:
            out.append(rng.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "n't", "'x"]))
    seps = [" "] * 20 + ["", "\n", "  ", "\t", "\n\n", " \n"]
    return "".join(w + rng.choice(seps) for w in out)


def invalid_bytes(rng):
    cases = [b"\xff", b"abc\x80def", b"\xe4\xb8", b"\xe4\xb8\xad\xe6\x96", b"\xf0\x9f\x98", b"\xc0\xaf",
             b"\xed\xa0\x80 surrogate", b"\xf4\x90\x80\x80 too big", b"\xe0\x80\x80 overlong", b"ok\xc3",
             b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc", b"\xf8\xa1\xa1\xa1\xa1",
             "<|im_start|>".encode() + b"\xe4" + "<|im_end|>".encode(), b"\xfe\xfe\xff\xff mixed \xe4\xbd\xa0\xe5\xa5"]
    for _ in range(20):
        cases.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))))
    return cases


# Text whose bytes some byte-level vocabularies lack (SmolLM2 has no token for bytes 0x04, 0x06, 0x13, 0x14, 0x16,
# 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, 0xF5-0xFF: C0/C1 and F5+ never occur in valid UTF-8, F1/F2 lead the characters
# U+40000..U+BFFFF), digit runs, code and chat-formatted text with special tokens.
def missing_bytes(rng):
    controls = ["\x04", "\x06", "\x13", "\x14", "\x16", "\x1d"]
    supplementary = [chr(cp) for cp in (0x40000, 0x4ABCD, 0x7FFFF, 0x80000, 0x9F123, 0xBFFFD, 0xA0000, 0x50505)]
    out = ["".join(controls), "a\x04b\x06c d\x13e\x14 f\x16\x16g\x1dh", "\x04\x04\x04 three", "x\x1d\x1dy",
           "".join(supplementary), "ab" + supplementary[0] + "cd " + supplementary[1] + supplementary[2] + "ef",
           " " + supplementary[3] + " the" + supplementary[4] + "ing " + supplementary[5],
           "mixed \x04" + supplementary[6] + "\x06" + supplementary[7] + " end\x14"]
    for _ in range(12):
        pool = controls + supplementary + list("abcde xyz.,") + [" the", "ing", "123", "\n"]
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(5, 60))))
    out += ["0123456789" * 5, "1 12 123 1234 12345 123456 1234567 3.14159 2e10 0x7f 1,000,000 -0.5",
            "".join(rng.choice("0123456789") for _ in range(300)), "a1b22c333d4444 x9y99z999 v0.1.2-rc3",
            "٠١٢٣٤٥ ０１２ ²³ ½ Ⅻ 123abc456"]
    out += ["def add(a, b):\n    return a + b  # 42\n\nprint(add(1, 2))\n",
            "<repo_name>hone/tokenizer<file_sep>src/main.cpp\n#include <cstdio>\nint main() { return 0; }\n",
            "<fim_prefix>def f(x):\n<fim_suffix>\n    return y<fim_middle>    y = x * 2<|endoftext|>"]
    out += ["<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n<|im_start|>assistant\n17 * 23 = 391.<|im_end|>\n",
            "<|im_start|>user\nHi\x04 there " + supplementary[0] + "<|im_end|>\n<|im_start|>assistant\n",
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023"
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n12345 + 678 = ?<|eot_id|>",
            "<s>[INST] Hello [/INST] Hi</s><unk> <s> plain </s>"]
    return out


def build():
    rng = random.Random(20240611)
    texts = []
    texts += PROSE + CODE + LATEX + SCRIPTS + EMOJI + COMBINING + SPECIAL
    texts += [numbers(rng) for _ in range(6)]
    texts += [whitespace(rng) for _ in range(12)]
    texts += long_words(rng)
    texts += urls_json(rng)
    texts += ["", " ", "\n", "a", "'s", " 's", "é", "\u0301", "🇺", "\r\n\r\n", "   \n", "<|im_start|>", "ſ'ſ 'Ś", "a\u180e's b \u180e c\u180e\u180e\n"]
    texts += [unicodedata.normalize("NFD", s) for s in SCRIPTS[:6] + PROSE[11:13]]
    while sum(len(t.encode()) for t in texts) < 110_000:
        texts.append(mixture(rng, rng.randint(20, 300)))
    entries = [{"text": t} for t in texts] + [{"hex": b.hex()} for b in invalid_bytes(rng)]
    # Appended after the original entries so that those keep their order.
    entries += [{"text": t} for t in missing_bytes(random.Random(20261201))]
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "tokenizer", "corpus.jsonl"))
    args = ap.parse_args()
    entries = build()
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for e in entries:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    print("%s: %d entries, %d bytes" % (args.out, len(entries), os.path.getsize(args.out)))


if __name__ == "__main__":
    main()
