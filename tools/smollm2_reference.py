#!/usr/bin/env python3
"""Reference logprobs of SmolLM2-135M-Instruct from Hugging Face transformers, read from the same GGUF hone reads.

Two uses:

  golden   tools/smollm2_reference.py golden --gguf FILE.gguf --folder D [--out tests/data/real/smollm2_logprobs.json]
           D is `hone convert --model FILE.gguf --output D`. Chat-formats a few conversations with D's tokenizer and
           chat template (transformers' apply_chat_template), then computes transformers' fp32 logprobs of each
           sequence with the weights transformers dequantizes from FILE.gguf itself. Writes the committed golden file
           that tests/unit/test_real_model.cpp compares hone's CPU engine with: per case the messages, the rendered
           text, the token ids and the n-1 logprobs.

  compare  tools/smollm2_reference.py compare --gguf FILE.gguf --golden G.json --hone OUT.h5 [--device cuda]
           OUT.h5 is `hone logprobs --model FILE.gguf --input <G's sequences> --output OUT.h5 [--device cuda]`.
           Prints max and mean |logprob - transformers fp32| for hone and for transformers in bf16 on the same
           sequences (the fidelity table of doc/model-engine.md).

Needs torch, transformers, accelerate, gguf and h5py (compare). Runs offline.
"""
import argparse
import json
import sys

CASES = [
    [{"role": "user", "content": "What is 41 + 29? Reply with the number only."}],
    [{"role": "system", "content": "You are a careful math tutor."},
     {"role": "user", "content": "Tom has 17 apples and gives away 9. How many apples does he have left?"},
     {"role": "assistant", "content": "Tom has 17 - 9 = 8 apples left."}],
    [{"role": "user", "content": "Write a haiku about the sea."},
     {"role": "assistant", "content": "Waves fold into foam,\nsalt wind carries gull voices,\nthe tide keeps its time."}],
    [{"role": "user", "content": "def add(a, b):\n    return a + b\n\nWhat does add(2, 40) return?"},
     {"role": "assistant", "content": "It returns 42."}],
]


def load_model(gguf, dtype, device):
    import os
    import torch
    from transformers import AutoModelForCausalLM
    d, f = os.path.dirname(os.path.abspath(gguf)), os.path.basename(gguf)
    m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, local_files_only=True)
    return m.to(device=device, dtype=dtype).eval()


def logprobs(model, ids, device):
    import torch
    with torch.no_grad():
        x = torch.tensor([ids], device=device)
        logits = model(x).logits[0].float()
        lp = torch.log_softmax(logits[:-1], dim=-1)
        return lp.gather(1, x[0, 1:, None])[:, 0].double().cpu().tolist()


def golden(a):
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(a.folder, local_files_only=True)
    model = load_model(a.gguf, torch.float32, "cpu")
    out = {"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "made_with": {
        "torch": torch.__version__, "transformers": __import__("transformers").__version__}, "cases": []}
    for msgs in CASES:
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=msgs[-1]["role"] == "user")
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out["cases"].append({"messages": msgs, "text": text, "tokens": ids, "logprobs": logprobs(model, ids, "cpu")})
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}: {len(out['cases'])} sequences, {sum(len(c['tokens']) for c in out['cases'])} tokens")


def compare(a):
    import h5py
    import torch
    g = json.load(open(a.golden))
    with h5py.File(a.hone, "r") as h:
        hone_lp, offsets = h["logprobs"][:], h["offsets"][:]
    fp32 = load_model(a.gguf, torch.float32, a.device)
    bf16 = load_model(a.gguf, torch.bfloat16, a.device)
    rows = {"hone": [], "transformers bf16": [], "transformers fp32 (this device) vs golden": []}
    for i, c in enumerate(g["cases"]):
        ref = logprobs(fp32, c["tokens"], a.device)
        rows["hone"] += [abs(x - y) for x, y in zip(hone_lp[offsets[i]:offsets[i + 1]], ref)]
        rows["transformers bf16"] += [abs(x - y) for x, y in zip(logprobs(bf16, c["tokens"], a.device), ref)]
        rows["transformers fp32 (this device) vs golden"] += [abs(x - y) for x, y in zip(ref, c["logprobs"])]
    for k, v in rows.items():
        print(f"{k:45s} max |dlogprob| {max(v):.3e}  mean {sum(v) / len(v):.3e}  ({len(v)} tokens)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("golden")
    g.add_argument("--gguf", required=True)
    g.add_argument("--folder", required=True)
    g.add_argument("--out", default="tests/data/real/smollm2_logprobs.json")
    c = sub.add_parser("compare")
    c.add_argument("--gguf", required=True)
    c.add_argument("--golden", default="tests/data/real/smollm2_logprobs.json")
    c.add_argument("--hone", required=True)
    c.add_argument("--device", default="cuda")
    a = p.parse_args()
    golden(a) if a.cmd == "golden" else compare(a)


if __name__ == "__main__":
    sys.exit(main())
