#!/usr/bin/python3
"""Small synthetic tokenizer.json files for hone's tokenizer tests, trained with Hugging Face `tokenizers` on
tests/data/tokenizer/corpus.jsonl, written to tests/data/tokenizer/fixtures/<name>/tokenizer.json:

  bytes_missing       byte-level BPE whose vocabulary lacks the bytes the training text never has (no unk_token:
                      missing bytes are dropped), Digits + ByteLevel pre-tokenizer as SmolLM2's file
  bytes_missing_unk   the same with unk_token "<unk>" (fuse_unk false)
  bytes_missing_fuse  the same with unk_token "<unk>" and fuse_unk true
  sp_legacy           SentencePiece-style BPE with byte_fallback as Llama 2 / TinyLlama files: Prepend + Replace
                      normalizer, no pre-tokenizer, Replace/ByteFallback/Fuse/Strip decoder, <s> post-processor
  sp_metaspace        the same vocabulary with NFKC, a Metaspace (prepend_scheme first) + Digits pre-tokenizer
                      and a ByteFallback + Metaspace decoder

Run tools/tokenizer_reference.py --fixtures afterwards for their golden ids. usage: tools/tokenizer_fixtures.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "tokenizer")


def training_texts():
    out = []
    with open(os.path.join(DATA, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if "text" in e:
                out.append(e["text"])
    # Leave some characters out of training so that the vocabularies lack them.
    drop = set("\x04\x06\x13\x14\x16\x1d~`^") | {c for t in out for c in t if ord(c) >= 0x3000}
    return ["".join(c for c in t if c not in drop) for t in out]


def byte_level_files(texts):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    base = json.loads(tok.to_str())
    out = {"bytes_missing": base}
    for name, fuse in [("bytes_missing_unk", False), ("bytes_missing_fuse", True)]:
        j = json.loads(json.dumps(base))
        vocab = j["model"]["vocab"]
        vocab["<unk>"] = len(vocab)
        j["model"]["unk_token"] = "<unk>"
        j["model"]["fuse_unk"] = fuse
        out[name] = j
    return out


def sentencepiece_files(texts):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=specials + byte_tokens, limit_alphabet=400,
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    j = json.loads(tok.to_str())
    # As Llama 2's file: only <unk>, <s>, </s> are added tokens; the <0xNN> tokens are ordinary vocabulary.
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] in specials]
    bos = j["model"]["vocab"]["<s>"]
    j["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", bos)]).__getstate__())
    j["decoder"] = json.loads(decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                                 decoders.Fuse(), decoders.Strip(" ", 1, 0)]).__getstate__())
    legacy = j
    meta = json.loads(json.dumps(j))
    meta["normalizer"] = {"type": "NFKC"}
    meta["pre_tokenizer"] = json.loads(pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=True),
        pre_tokenizers.Digits(individual_digits=True)]).__getstate__())
    meta["decoder"] = json.loads(decoders.Sequence([decoders.ByteFallback(),
                                                    decoders.Metaspace(replacement="\u2581", prepend_scheme="first")]).__getstate__())
    return {"sp_legacy": legacy, "sp_metaspace": meta}


def main():
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        sys.exit("tools/tokenizer_fixtures.py needs the Python package 'tokenizers'")
    texts = training_texts()
    files = {}
    files.update(byte_level_files(texts))
    files.update(sentencepiece_files(texts))
    from tokenizers import Tokenizer
    for name, j in files.items():
        d = os.path.join(DATA, "fixtures", name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        text = json.dumps(j, ensure_ascii=False, separators=(",", ":"))
        Tokenizer.from_str(text)  # loads in HF tokenizers
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text + "\n")
        print("%s: %d bytes" % (path, os.path.getsize(path)))


if __name__ == "__main__":
    main()
