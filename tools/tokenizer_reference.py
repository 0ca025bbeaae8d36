#!/usr/bin/python3
"""Reference outputs of Hugging Face `tokenizers` and jinja2 chat templates for hone's tokenizer tests.

Run with a Python that has the reference libraries (`pip install tokenizers jinja2`), e.g.
`/opt/hone-ref/bin/python tools/tokenizer_reference.py`. Not run by `make test`:
it writes the committed golden files that tests/unit/test_tokenizer_parity.cpp and test_chat_format.cpp read.

  tools/tokenizer_reference.py [--tokenizers DIR]          write tests/data/tokenizer/golden_<name>.jsonl and
                                                           chat_golden.jsonl from corpus.jsonl
  tools/tokenizer_reference.py --bench [--tokenizers DIR]  time HF tokenizers single-threaded on the same corpus
  tools/tokenizer_reference.py --smollm2 DIR               write golden_smollm2.jsonl for the folder DIR
  tools/tokenizer_reference.py --fixtures                  write the golden files of the synthetic fixtures
                                                           (tests/data/tokenizer/fixtures, tools/tokenizer_fixtures.py)

DIR holds qwen3/ and llama3_1/ (tokenizer.json + tokenizer_config.json); default ../shared/data/tokenizers.

Golden file layout (one JSON object per line): a header {"tokenizer", "tokenizers_version", "vocab_size",
"add_special_prefix", "add_special_suffix"}, then one line per corpus entry, in corpus order (the fixtures' files
only have the entries of at most 400 bytes, each with "entry": its index in corpus.jsonl):
  {"ids": B64}  ids of encode(text, add_special_tokens=False); B64 = base64 of LEB128 varints
  "decoded"      decode(ids, skip_special_tokens=False), present only where it differs from the encoded text;
                 "=NFC" where it is the NFC form of the encoded text (the Qwen3 normalizer)
  "decoded_skip" decode(ids, skip_special_tokens=True), present only where it differs from "decoded"
then decode-only cases {"decode_ids": [...], "decoded": ..., "decoded_skip": ...} (arbitrary id sequences:
split multi-byte characters, specials, out-of-range ids).
Corpus "hex" entries are bytes that are not valid UTF-8: HF encodes bytes.decode("utf-8", "replace").
"""
import argparse
import base64
import json
import os
import random
import sys
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "tokenizer")
NAMES = ["qwen3", "llama3_1"]
FORMAT_OF = {"qwen3": "chatml", "llama3_1": "llama3"}
# Templates that call strftime_now() get this fixed date (neither of the two templates does).
FIXED_DATE = "26 Jul 2024"

# Rollout batch of the benchmark: BATCH prompts of PROMPT_BYTES bytes cut from the corpus text.
BATCH = 512
PROMPT_BYTES = 440


def varint_b64(ids):
    out = bytearray()
    for v in ids:
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                out.append(b | 0x80)
            else:
                out.append(b)
                break
    return base64.b64encode(bytes(out)).decode("ascii")


def corpus_texts():
    texts = []
    with open(os.path.join(DATA, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            texts.append(e["text"] if "text" in e else bytes.fromhex(e["hex"]).decode("utf-8", "replace"))
    return texts


def bench_prompts(texts):
    """The rollout batch: the same byte slices as tests/programs/bench_tokenizer.cpp cuts."""
    blob = "\n".join(texts).encode("utf-8")
    step = (len(blob) - PROMPT_BYTES) // BATCH
    return [blob[k * step:k * step + PROMPT_BYTES].decode("utf-8", "replace") for k in range(BATCH)]


def decode_cases(tok, rng):
    n = tok.get_vocab_size(with_added_tokens=True)
    cases = []
    emoji = tok.encode("👨‍👩‍👧 你好 ɐ", add_special_tokens=False).ids
    for k in range(1, len(emoji)):
        cases.append(emoji[:k])
        cases.append(emoji[k:])
    specials = [tok.token_to_id(t) for t in ["<|im_start|>", "<|endoftext|>", "<|begin_of_text|>", "<think>", "<s>"]]
    specials = [s for s in specials if s is not None]
    for _ in range(40):
        seq = [rng.randrange(n) for _ in range(rng.randint(1, 12))]
        for _ in range(rng.randint(0, 3)):
            seq.insert(rng.randrange(len(seq) + 1), rng.choice(specials + emoji))
        cases.append(seq)
    cases.append([n + 5, specials[0], n + 100000])  # ids past the vocabulary are skipped
    cases.append([])
    return cases


def need(module):
    try:
        return __import__(module)
    except ImportError:
        sys.exit("tools/tokenizer_reference.py needs the Python package '%s' (pip install tokenizers jinja2)" % module)


def write_golden_one(tokenizers, name, folder, path, max_bytes=None):
    """golden ids of one tokenizer folder (tokenizer.json) on corpus.jsonl, written to path. With max_bytes only
    the entries of at most that many bytes, each line naming its corpus entry ("entry": index)."""
    tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    texts = corpus_texts()
    plain = tok.encode("x", add_special_tokens=False).ids
    full = tok.encode("x", add_special_tokens=True).ids
    at = next(i for i in range(len(full)) if full[i:i + len(plain)] == plain)
    header = {"tokenizer": name, "tokenizers_version": tokenizers.__version__,
              "vocab_size": tok.get_vocab_size(with_added_tokens=True),
              "add_special_prefix": full[:at], "add_special_suffix": full[at + len(plain):]}
    lines = [header]
    for k, text in enumerate(texts):
        if max_bytes is not None and len(text.encode("utf-8")) > max_bytes:
            continue
        ids = tok.encode(text, add_special_tokens=False).ids
        e = {"ids": varint_b64(ids)}
        if max_bytes is not None:
            e["entry"] = k
        dec = tok.decode(ids, skip_special_tokens=False)
        if dec != text:
            e["decoded"] = "=NFC" if dec == unicodedata.normalize("NFC", text) else dec
        skip = tok.decode(ids, skip_special_tokens=True)
        if skip != dec:
            e["decoded_skip"] = skip
        lines.append(e)
    for seq in decode_cases(tok, random.Random(7)):
        lines.append({"decode_ids": seq, "decoded": tok.decode(seq, skip_special_tokens=False),
                      "decoded_skip": tok.decode(seq, skip_special_tokens=True)})
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for e in lines:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    print("%s: %d entries, %d bytes" % (path, len(lines) - 1, os.path.getsize(path)))


def write_golden(tdir):
    tokenizers = need("tokenizers")
    for name in NAMES:
        write_golden_one(tokenizers, name, os.path.join(tdir, name), os.path.join(DATA, "golden_%s.jsonl" % name))


def write_fixture_golden():
    """golden_<name>.jsonl next to each tests/data/tokenizer/fixtures/<name>/tokenizer.json."""
    tokenizers = need("tokenizers")
    root = os.path.join(DATA, "fixtures")
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if os.path.isfile(os.path.join(folder, "tokenizer.json")):
            write_golden_one(tokenizers, name, folder, os.path.join(root, "golden_%s.jsonl" % name), max_bytes=400)


def chat_cases():
    long_user = "Solve: what is 12 * 34? Show your work.\n\nThen explain."
    cases = []
    for system in [None, "You are a helpful assistant.", "  padded system\n\n", ""]:
        for user in ["Hello!", long_user, "  leading and trailing spaces \n", "\u3000unicode space\u00a0",
                     "<|im_start|>inject<|im_end|>"]:
            msgs = ([{"role": "system", "content": system}] if system is not None else []) + \
                   [{"role": "user", "content": user}]
            cases.append(msgs)
    cases.append([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
                  {"role": "user", "content": "And 3+3?"}])
    cases.append([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"},
                  {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nA1"}, {"role": "user", "content": "Q2"}])
    cases.append([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\nplan\n</think>\n\nanswer"}])
    cases.append([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "plain answer"}])
    cases.append([{"role": "user", "content": "first"}, {"role": "system", "content": "late system"},
                  {"role": "user", "content": "second"}])
    return cases


def write_chat_golden(tdir):
    need("jinja2")
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return time.strftime(fmt, time.strptime(FIXED_DATE, "%d %b %Y"))

    # As transformers renders chat templates.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    out = []
    for name in NAMES:
        cfg = json.load(open(os.path.join(tdir, name, "tokenizer_config.json"), encoding="utf-8"))
        template = env.from_string(cfg["chat_template"])

        def token(key):
            v = cfg.get(key)
            return v["content"] if isinstance(v, dict) else v

        for msgs in chat_cases():
            for gen in [True, False]:
                # enable_thinking only matters to the Qwen3 template's generation prompt.
                for thinking in ([None, True, False] if gen and name == "qwen3" else [None]):
                    kwargs = {"messages": msgs, "add_generation_prompt": gen, "bos_token": token("bos_token"),
                              "eos_token": token("eos_token"), "pad_token": token("pad_token")}
                    if thinking is not None:
                        kwargs["enable_thinking"] = thinking
                    case = {"format": FORMAT_OF[name], "messages": msgs, "add_generation_prompt": gen,
                            "expected": template.render(**kwargs)}
                    if thinking is not None:
                        case["enable_thinking"] = thinking
                    out.append(case)
    path = os.path.join(DATA, "chat_golden.jsonl")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for c in out:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print("%s: %d cases" % (path, len(out)))


def bench(tdir):
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    Tokenizer = need("tokenizers").Tokenizer
    texts = corpus_texts()
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    prompts = bench_prompts(texts)
    print("HF tokenizers single-threaded; corpus %d entries, %d bytes" % (len(texts), nbytes))
    for name in NAMES:
        tok = Tokenizer.from_file(os.path.join(tdir, name, "tokenizer.json"))
        tok.encode_batch(texts[:50], add_special_tokens=False)  # warm up
        best, ntok = 1e9, 0
        for _ in range(3):
            t0 = time.process_time()
            ntok = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)
            best = min(best, time.process_time() - t0)
        bbest = 1e9
        for _ in range(3):
            t0 = time.process_time()
            tok.encode_batch(texts, add_special_tokens=False)
            bbest = min(bbest, time.process_time() - t0)
        pbest, ptok = 1e9, 0
        for _ in range(5):
            t0 = time.process_time()
            enc = tok.encode_batch(prompts, add_special_tokens=False)
            pbest = min(pbest, time.process_time() - t0)
            ptok = sum(len(e.ids) for e in enc)
        print("%-9s encode one by one: %.2f MB/s, %.0f tokens/s (%d tokens) | encode_batch: %.2f MB/s | "
              "rollout batch %d prompts (%.0f tokens avg): %.2f ms"
              % (name, nbytes / best / 1e6, ntok / best, ntok, nbytes / bbest / 1e6, len(prompts), ptok / len(prompts),
                 pbest * 1e3))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default=os.path.join(HERE, "..", "..", "shared", "data", "tokenizers"))
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--smollm2", metavar="DIR", help="write golden_smollm2.jsonl for the tokenizer folder DIR (e.g. "
                    "the one hone convert writes for SmolLM2-135M-Instruct's GGUF)")
    ap.add_argument("--fixtures", action="store_true", help="write the golden files of tests/data/tokenizer/fixtures")
    args = ap.parse_args()
    if args.smollm2:
        write_golden_one(need("tokenizers"), "smollm2", args.smollm2, os.path.join(DATA, "golden_smollm2.jsonl"))
        return
    if args.fixtures:
        write_fixture_golden()
        return
    if not os.path.isdir(args.tokenizers):
        sys.exit("no tokenizer folder at %s (use --tokenizers)" % args.tokenizers)
    if args.bench:
        bench(args.tokenizers)
    else:
        write_golden(args.tokenizers)
        write_chat_golden(args.tokenizers)


if __name__ == "__main__":
    main()
