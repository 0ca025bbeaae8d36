"""Hugging Face transformers as the reference for hone's model engine and checkpoint I/O.

Needs torch, transformers and safetensors (`pip install torch transformers safetensors`): run it with a Python that
has them, e.g. `/opt/hone-ref/bin/python tools/hf_reference.py goldens`. `compare` reads hone's HDF5 output with h5py
when it is installed, else with the h5dump tool (HDF5 tools).
Not run by `make test`; its `goldens` mode writes the small golden files committed under tests/data/hf.

Modes:
  goldens    tests/data/hf/{llama,qwen2,qwen3,qwen3_moe}: a tiny random checkpoint written by transformers itself
             (config.json + model.safetensors, f32), sequences.jsonl and reference.safetensors (definition below).
  roundtrip  a tiny random checkpoint per architecture, rewritten by `hone convert` (f32, bf16, and sharded);
             transformers loads hone's output and must give the same logprobs (f32: bitwise; bf16: bitwise equal
             to the same model with its weights rounded to bf16).
  checkpoint a model folder holding only config.json and a byte-level tokenizer per architecture, trained two steps
             by `hone run` (model.init = "random"); the checkpoint's hf/ folder must load in transformers as is
             (AutoModelForCausalLM and AutoTokenizer, dtype from its config.json: bfloat16), hold the checkpoint's fp32
             master weights rounded to bf16 (the same logprobs, bitwise, as those weights rounded by torch), agree
             with `hone logprobs` on it, and tokenize as hone does; vLLM loads it too when it is installed.
  compare    a random checkpoint at a real shape (qwen3-0.6b, llama-3.2-1b) or tiny, scored by
  compare    a random checkpoint at a real shape (qwen3-0.6b, llama-3.2-1b, qwen3-30b-a3b-2l) or tiny, scored by
             `hone logprobs` and by transformers in fp32 on the same sequences; prints the logprob differences.
             --device cuda runs hone's bf16 GPU engine (transformers runs on the GPU too when torch has CUDA, still
             fp32). --grads also compares the gradient of L (below; `hone logprobs --grad-output`) tensor by tensor:
             cosine similarity and relative L2. The last line, SUMMARY ..., is meant for machines.

reference.safetensors (every tensor f32 unless said otherwise), for the sequences s = 0..S-1 of sequences.jsonl,
each run through the model on its own (batch of one, no packing, positions 0..n_s-1, eager attention, fp32):
  logprobs  [N]    for each sequence, for t = 1..n_s-1: log softmax(logits[t-1])[tokens[t]], i.e. the log-prob of
                   each token given the previous ones; the sequences' n_s - 1 values concatenated in order.
  entropy   [N]    at the same positions: -sum_v p_v log p_v with p = softmax(logits[t-1]).
  offsets   [S+1]  i64; sequence s owns logprobs[offsets[s]:offsets[s+1]].
  grad.<hf parameter name>  the gradient of L = sum_i c_i * logprobs[i], c_i = 1 + 0.1 * (i mod 5), with i the
                   index into the concatenated logprobs array, for every parameter transformers lists in
                   named_parameters() (a tied lm_head is embed_tokens and receives both gradients there).
The header metadata "parameter_order" holds the JSON list of parameter names in named_parameters() order.
A mixture of experts (qwen3_moe) also stores, for the same sequences each run on its own:
  aux_loss  [S]    the load-balancing loss transformers returns with output_router_logits (aux_loss).
  aux_grad.<hf parameter name>  the gradient of sum_s aux_loss[s].
Gradients of the experts are stored under the checkpoint's names (model.layers.<i>.mlp.experts.<e>.gate_proj.weight,
up_proj, down_proj: transformers 5 holds them fused as mlp.experts.gate_up_proj and mlp.experts.down_proj).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HONE = os.path.join(ROOT, "build", "hone")
SEQUENCE_LENGTHS = (5, 17, 40)


def tiny_config(arch):
    """The golden shapes: vocab 96, hidden 32, intermediate 64, 2 layers, 4 heads, 2 kv heads."""
    common = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, bos_token_id=1,
                  eos_token_id=2)
    if arch == "llama":
        # original_max_position_embeddings 16 puts the head_dim-8 frequencies on both sides of the llama3 band, so
        # the scaling changes the result at the 40-token sequence.
        return LlamaConfig(**common, rope_theta=10000.0, tie_word_embeddings=True,
                           rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
    if arch == "qwen2":
        return Qwen2Config(**common, rope_theta=10000.0, tie_word_embeddings=False)
    if arch == "qwen3":
        return Qwen3Config(**common, head_dim=16, rope_theta=1000000.0, tie_word_embeddings=False)
    if arch == "qwen3_moe":
        # Hidden 16 (files as small as the dense goldens'), three layers with the middle one dense
        # (mlp_only_layers), 4 experts of width 16, 2 per token, renormalized.
        moe = dict(common, hidden_size=16, intermediate_size=32, num_hidden_layers=3)
        return Qwen3MoeConfig(**moe, head_dim=16, rope_theta=1000000.0, tie_word_embeddings=False,
                              num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True,
                              decoder_sparse_step=1, mlp_only_layers=[1], router_aux_loss_coef=0.01)
    raise ValueError(arch)


def real_config(arch, shape):
    if shape == "tiny":
        return tiny_config(arch)
    if shape == "qwen3-0.6b":
        return Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                           num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                           rope_theta=1000000.0, max_position_embeddings=40960, rms_norm_eps=1e-6,
                           bos_token_id=151643, eos_token_id=151645)
    if shape == "llama-3.2-1b":
        return LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                           num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True,
                           rope_theta=500000.0, max_position_embeddings=131072, rms_norm_eps=1e-5,
                           bos_token_id=128000, eos_token_id=[128001, 128008, 128009],
                           rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    if shape == "qwen3-30b-a3b-2l":  # the Qwen3-30B-A3B shape cut to its first two layers
        return Qwen3MoeConfig(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=2,
                              num_attention_heads=32, num_key_value_heads=4, head_dim=128, tie_word_embeddings=False,
                              rope_theta=1000000.0, max_position_embeddings=40960, rms_norm_eps=1e-6,
                              num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True,
                              decoder_sparse_step=1, mlp_only_layers=[], router_aux_loss_coef=0.001,
                              bos_token_id=151643, eos_token_id=151645)
    raise ValueError(shape)


def build_model(config, seed, randomize_all=True):
    """A model from `config` with every parameter random: matrices N(0, 0.15^2), embeddings and lm_head N(0, 0.4^2)
    (logits of a few units: neither flat nor saturated), norm weights
    uniform in [0.5, 1.5] and biases N(0, 0.1^2), so that a wrong use of a norm or a bias changes the result."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    if randomize_all:
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.copy_(0.5 + torch.rand(p.shape, generator=g))
                elif name.endswith(".bias"):
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
                elif "embed_tokens" in name or name.startswith("lm_head"):
                    p.copy_(0.4 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(0.15 * torch.randn(p.shape, generator=g))
    model.eval()
    return model


def is_moe(model):
    return getattr(model.config, "num_experts", 0) > 0 and model.config.model_type == "qwen3_moe"


def sequence_logprobs(model, tokens, with_aux=False):
    """logprobs and entropies [n-1] of one sequence, as defined in the module docstring (and the aux loss)."""
    ids = torch.tensor([tokens], dtype=torch.long, device=model.device)
    out = model(input_ids=ids, output_router_logits=True) if with_aux else model(input_ids=ids)
    logits = out.logits[0, :-1].float()
    logp = torch.log_softmax(logits, dim=-1)
    target = ids[0, 1:]
    lp = logp.gather(-1, target[:, None])[:, 0]
    ent = -(logp.exp() * logp).sum(-1)
    return (lp, ent, out.aux_loss) if with_aux else (lp, ent)


def checkpoint_gradients(model, prefix):
    """Every parameter's gradient under the checkpoint's names: the fused experts of transformers 5 split per
    expert as the published checkpoints (and hone) name them."""
    out = {}
    for name, p in model.named_parameters():
        g = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
        if name.endswith("mlp.experts.gate_up_proj"):
            base, half = name[:-len("gate_up_proj")], g.shape[1] // 2
            for e in range(g.shape[0]):
                out[f"{prefix}{base}{e}.gate_proj.weight"] = g[e, :half].contiguous()
                out[f"{prefix}{base}{e}.up_proj.weight"] = g[e, half:].contiguous()
        elif name.endswith("mlp.experts.down_proj"):
            base = name[:-len("down_proj")]
            for e in range(g.shape[0]):
                out[f"{prefix}{base}{e}.down_proj.weight"] = g[e].contiguous()
        else:
            out[prefix + name] = g.contiguous()
    return out


def reference(model, sequences):
    model.zero_grad(set_to_none=True)
    lps, ents, offsets = [], [], [0]
    for tokens in sequences:
        lp, ent = sequence_logprobs(model, tokens)
        first = offsets[-1]
        c = torch.tensor([1.0 + 0.1 * ((first + i) % 5) for i in range(lp.numel())])
        (c * lp).sum().backward()  # gradients add up over the sequences
        lps.append(lp.detach())
        ents.append(ent.detach())
        offsets.append(first + lp.numel())
    out = {"logprobs": torch.cat(lps).contiguous(), "entropy": torch.cat(ents).contiguous(),
           "offsets": torch.tensor(offsets, dtype=torch.int64)}
    out.update(checkpoint_gradients(model, "grad."))
    if is_moe(model):
        model.zero_grad(set_to_none=True)
        aux = []
        for tokens in sequences:
            _, _, a = sequence_logprobs(model, tokens, with_aux=True)
            a.backward()
            aux.append(a.detach().reshape(1))
        out["aux_loss"] = torch.cat(aux).float().contiguous()
        out.update(checkpoint_gradients(model, "aux_grad."))
    return out


def write_goldens(args):
    seeds = {"llama": 101, "qwen2": 202, "qwen3": 303, "qwen3_moe": 404}
    for arch, seed in seeds.items():
        if args.arch and arch not in args.arch.split(","):
            continue
        out = os.path.join(ROOT, "tests", "data", "hf", arch)
        if os.path.isdir(out):
            shutil.rmtree(out)
        model = build_model(tiny_config(arch), seed)
        model.save_pretrained(out)
        for extra in ("generation_config.json",):
            if os.path.exists(os.path.join(out, extra)):
                os.remove(os.path.join(out, extra))
        rng = np.random.default_rng(seed)
        vocab = model.config.vocab_size
        sequences = [[int(t) for t in rng.integers(0, vocab, size=n)] for n in SEQUENCE_LENGTHS]
        with open(os.path.join(out, "sequences.jsonl"), "w") as f:
            for s in sequences:
                f.write(json.dumps({"tokens": s}) + "\n")
        ref = reference(model, sequences)
        order = [name[len("grad."):] for name in ref if name.startswith("grad.")]
        save_file(ref, os.path.join(out, "reference.safetensors"),
                  metadata={"format": "pt", "parameter_order": json.dumps(order),
                            "definition": "see tools/hf_reference.py and doc/models.md"})
        sizes = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out))}
        print(f"{arch}: {sum(p.numel() for p in model.parameters())} parameters, "
              f"mean logprob {ref['logprobs'].mean():.4f}, mean entropy {ref['entropy'].mean():.4f} "
              f"(uniform {math.log(vocab):.4f}); files {sizes}")


def logprobs_of(model, sequences):
    with torch.no_grad():
        return torch.cat([sequence_logprobs(model, s)[0] for s in sequences])


def run(cmd, input_text=None):
    r = subprocess.run(cmd, capture_output=True, text=True, input=input_text)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def safe_open_first(path):
    """The first tensor of a safetensors file."""
    with safe_open(path, "pt") as f:
        return f.get_tensor(next(iter(f.keys())))


def roundtrip(args):
    failures = 0
    for arch, seed in (("llama", 11), ("qwen2", 12), ("qwen3", 13)):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "src")
            model = build_model(tiny_config(arch), seed)
            model.save_pretrained(src)
            rng = np.random.default_rng(seed)
            sequences = [[int(t) for t in rng.integers(0, 96, size=n)] for n in (7, 33)]
            want = logprobs_of(model, sequences)
            bf16_model = build_model(tiny_config(arch), seed)
            with torch.no_grad():
                for p in bf16_model.parameters():
                    p.copy_(p.to(torch.bfloat16).to(torch.float32))
            want_bf16 = logprobs_of(bf16_model, sequences)
            cases = (("f32", [], want), ("bf16", [], want_bf16), ("f32-sharded", ["--max-shard-size", "20000"], want),
                     ("bf16-sharded", ["--max-shard-size", "10KB"], want_bf16))
            for name, extra, expect in cases:
                dst = os.path.join(tmp, name)
                run([args.hone, "convert", "--model", src, "--output", dst, "--dtype", name.split("-")[0]] + extra)
                files = sorted(os.listdir(dst))
                stored = {f"{t.dtype}" for f in files if f.endswith(".safetensors")
                          for t in [safe_open_first(os.path.join(dst, f))]}
                want_dtype = "torch.bfloat16" if name.startswith("bf16") else "torch.float32"
                if stored != {want_dtype}:
                    sys.exit(f"{arch} {name}: stored dtypes {stored}, expected {want_dtype}")
                loaded = AutoModelForCausalLM.from_pretrained(dst, attn_implementation="eager", dtype=torch.float32)
                loaded.eval()
                got = logprobs_of(loaded, sequences)
                diff = (got - expect).abs().max().item()
                ok = diff == 0.0
                failures += not ok
                print(f"{arch} {name}: files {files}; max |logprob diff| {diff:.3g} {'OK' if ok else 'MISMATCH'}")
    if failures:
        sys.exit(f"{failures} round trip(s) differ")


def byte_level_tokenizer(folder):
    """A byte-level BPE tokenizer (256 byte tokens, no merges, <|endoftext|> = 256) saved as a transformers folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", model_max_length=64)
    fast.add_special_tokens({"eos_token": "<|endoftext|>"})
    fast.save_pretrained(folder)
    return fast


def checkpoint(args):
    failures = 0
    for arch, seed in (("llama", 21), ("qwen2", 22), ("qwen3", 23)):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "m")
            config = tiny_config(arch)
            config.vocab_size = 260
            config.eos_token_id = 256
            config.bos_token_id = None
            config.save_pretrained(src)  # config.json only: no weights
            byte_level_tokenizer(src)
            deck = os.path.join(tmp, "deck.toml")
            with open(deck, "w") as f:
                f.write(f"""[run]\nname = "hf"\nseed = {seed}\nmax_steps = 2\n[model]\npath = "{src}"\ninit = "random"
[tokenizer]\nchat_format = "none"\n[data]\ntask = "reverse"\nmin_length = 1\nmax_length = 3\nalphabet = "digits"
[grpo]\nnum_prompts_per_step = 4\nnum_generations_per_prompt = 4\n[generation]\nmax_new_tokens = 4
max_total_sequence_length = 32\n[train]\nlearning_rate = 1e-2\nmax_tokens_per_microbatch = 128
[checkpoint]\ndir = "{tmp}/ck"\n[output]\ndir = "{tmp}/out"\n""")
            run([args.hone, "run", deck])
            hf = os.path.join(tmp, "ck", "step_00000002", "hf")
            master = os.path.join(tmp, "ck", "step_00000002")
            files = sorted(os.listdir(hf))
            model = AutoModelForCausalLM.from_pretrained(hf, attn_implementation="eager", dtype="auto")
            tok = AutoTokenizer.from_pretrained(hf)
            problems = []
            if model.dtype != torch.bfloat16:
                problems.append(f"loaded as {model.dtype}, not torch.bfloat16")
            # The master weights rounded to bf16 by torch, in a model built from the same config.json.
            rounded = AutoModelForCausalLM.from_pretrained(master, attn_implementation="eager", dtype=torch.float32)
            with torch.no_grad():
                for p in rounded.parameters():
                    p.copy_(p.to(torch.bfloat16).to(torch.float32))
            model = model.to(torch.float32).eval()
            rounded.eval()
            rng = np.random.default_rng(seed)
            sequences = [[int(t) for t in rng.integers(0, 257, size=n)] for n in (7, 25)]
            got, want = logprobs_of(model, sequences), logprobs_of(rounded, sequences)
            diff = (got - want).abs().max().item()
            if diff != 0.0:
                problems.append(f"hf/ logprobs differ from the rounded master by {diff:.3g}")
            seqs = os.path.join(tmp, "seqs.jsonl")
            with open(seqs, "w") as f:
                for s_ in sequences:
                    f.write(json.dumps({"tokens": s_}) + "\n")
            run([args.hone, "logprobs", "--model", hf, "--input", seqs, "--output", os.path.join(tmp, "lp.h5")])
            hone_lp = h5_dataset(os.path.join(tmp, "lp.h5"), "logprobs", np.float32)
            hone_diff = float(np.abs(hone_lp - got.numpy()).max())
            if hone_diff > 1e-4:
                problems.append(f"hone logprobs differ from transformers' by {hone_diff:.3g}")
            text = "rev:123=321"
            hone_ids = run([args.hone, "tokenize", "--tokenizer", hf], input_text=text).split()
            hf_ids = [str(i) for i in tok(text, add_special_tokens=False)["input_ids"]]
            if hone_ids != hf_ids:
                problems.append(f"tokenizer: hone {hone_ids}, transformers {hf_ids}")
            if tok.eos_token_id != 256:
                problems.append(f"eos token id {tok.eos_token_id}")
            vllm_note = vllm_loads(hf)
            failures += bool(problems)
            print(f"{arch}: hf/ files {files}; logprob diff to the rounded master {diff:.3g}, to hone {hone_diff:.3g}; "
                  f"{vllm_note}; {'OK' if not problems else 'FAILED: ' + '; '.join(problems)}")
    if failures:
        sys.exit(f"{failures} checkpoint folder(s) failed")


def vllm_loads(folder):
    """vLLM loads the folder and generates a token, when vLLM is installed (and has a GPU)."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        return "vLLM not installed: not tried"
    from vllm import LLM, SamplingParams
    llm = LLM(model=folder, dtype="bfloat16", enforce_eager=True, gpu_memory_utilization=0.2)
    out = llm.generate(["rev:12="], SamplingParams(max_tokens=2, temperature=0))
    return f"vLLM generated {out[0].outputs[0].token_ids!r}"


def h5_dataset(path, name, dtype):
    """Reads a 1-D dataset with h5py, or with the h5dump tool where h5py is missing."""
    try:
        import h5py
        with h5py.File(path, "r") as f:
            return np.asarray(f[name][...], dtype=dtype)
    except ImportError:
        pass
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        run(["h5dump", "-d", name, "-b", "LE", "-o", f.name, path])
        return np.fromfile(f.name, dtype=dtype)


def reference_gradients(model, sequences):
    """The gradient of L = sum_i c_i * logprobs[i] (module docstring) by parameter name (the checkpoint's names:
    experts one by one), on the model's device."""
    model.zero_grad(set_to_none=True)
    first = 0
    for tokens in sequences:
        lp, _ = sequence_logprobs(model, tokens)
        c = torch.tensor([1.0 + 0.1 * ((first + i) % 5) for i in range(lp.numel())], device=lp.device)
        (c * lp).sum().backward()
        first += lp.numel()
        del lp
    return checkpoint_gradients(model, "")


def compare_gradients(path, want):
    """Prints cosine similarity and relative L2 of hone's gradients (safetensors at path) against `want`; returns
    summary fields."""
    rows, dot, nn_got, nn_want = [], 0.0, 0.0, 0.0
    with safe_open(path, "pt") as f:
        names = set(f.keys())
        if names != set(want):
            sys.exit(f"hone's gradient names differ: missing {sorted(set(want) - names)}, "
                     f"extra {sorted(names - set(want))}")
        for name, w in want.items():
            g = f.get_tensor(name).to(device=w.device, dtype=torch.float64).flatten()
            w = w.detach().to(torch.float64).flatten()
            d, gg, ww = float(g @ w), float(g @ g), float(w @ w)
            dd = float((g - w).square().sum())
            cos = d / math.sqrt(max(gg * ww, 1e-300))
            rel = math.sqrt(dd / max(ww, 1e-300))
            rows.append((name, cos, rel))
            dot, nn_got, nn_want = dot + d, nn_got + gg, nn_want + ww
            print(f"  grad {name}: cos {cos:.6f} rel_l2 {rel:.3e}")
            del g, w
    cosines = sorted(cos for _, cos, _ in rows)
    flat = dot / math.sqrt(max(nn_got * nn_want, 1e-300))
    median = float(np.median(cosines))
    print(f"gradients: {len(rows)} tensors; cosine min {cosines[0]:.6f}, median {median:.6f}, flat {flat:.6f}")
    worst = sorted(rows, key=lambda r: (r[1], -r[2]))[:5]  # ties (cos 1.0 at fp32) by rel_l2
    print("worst 5 by cosine: " + ", ".join(f"{n} (cos {c:.6f}, rel_l2 {r:.3e})" for n, c, r in worst))
    return f"grad_cos_min={cosines[0]:.6f} grad_cos_median={median:.6f} grad_cos_flat={flat:.6f}"


def compare(args):
    config = real_config(args.arch, args.shape)
    if args.shape == "tiny":
        model = build_model(config, args.seed)
    else:  # transformers' own initialization at the real shape, with weights rounded to bf16 to halve the files
        torch.manual_seed(args.seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
        model.eval()
    rng = np.random.default_rng(args.seed)
    lengths = [int(x) for x in args.lengths.split(",")]
    sequences = [[int(t) for t in rng.integers(0, config.vocab_size, size=n)] for n in lengths]
    with tempfile.TemporaryDirectory() as tmp:
        mdir = os.path.join(tmp, "model")
        if args.shape == "tiny":
            model.save_pretrained(mdir)
        else:  # a bf16 copy of the parameters only: casting the model would also round its RoPE frequency buffer
            state = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
            model.save_pretrained(mdir, state_dict=state)
            del state
        seqs = os.path.join(tmp, "seqs.jsonl")
        with open(seqs, "w") as f:
            for s in sequences:
                f.write(json.dumps({"tokens": s}) + "\n")
        out = os.path.join(tmp, "out.h5")
        grads = os.path.join(tmp, "grads.safetensors")
        run([args.hone, "logprobs", "--model", mdir, "--input", seqs, "--output", out, "--device", args.device]
            + (["--grad-output", grads] if args.grads else []))
        got = h5_dataset(out, "/logprobs", "<f4")
        offsets = h5_dataset(out, "/offsets", "<i8")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model.to(device)
        want = logprobs_of(model, sequences).cpu().numpy()
        grad_summary = ""
        if args.grads:
            grad_summary = " " + compare_gradients(grads, reference_gradients(model, sequences))
    want_offsets = np.cumsum([0] + [n - 1 for n in lengths])
    if got.shape != want.shape or not np.array_equal(offsets, want_offsets):
        sys.exit(f"hone logprobs gave {got.shape[0]} values with offsets {offsets.tolist()}; expected "
                 f"{want.shape[0]} with offsets {want_offsets.tolist()}")
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    print(f"{args.arch} {args.shape} (hone on {args.device}, transformers fp32 on {device}): {len(sequences)} "
          f"sequences, {want.size} logprobs; max |diff| {d.max():.3e}, mean |diff| {d.mean():.3e}; "
          f"mean logprob {want.mean():.4f}")
    print(f"SUMMARY arch={args.arch} shape={args.shape} device={args.device} lengths={args.lengths} "
          f"max_abs={d.max():.4e} mean_abs={d.mean():.4e}{grad_summary}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    g = sub.add_parser("goldens", help="write tests/data/hf/{llama,qwen2,qwen3,qwen3_moe}")
    g.add_argument("--arch", default="", help="comma-separated architectures to write (default: all)")
    sub.add_parser("roundtrip", help="hone convert output loaded by transformers")
    sub.add_parser("checkpoint", help="a hone checkpoint's hf/ folder loaded by transformers (and vLLM)")
    c = sub.add_parser("compare", help="hone logprobs against transformers at a real shape")
    c.add_argument("--arch", choices=("qwen3", "llama", "qwen3_moe"), required=True)
    c.add_argument("--shape", choices=("qwen3-0.6b", "llama-3.2-1b", "qwen3-30b-a3b-2l", "tiny"), required=True)
    c.add_argument("--lengths", default="300,200,257", help="comma-separated sequence lengths")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where hone runs (cuda: bf16 engine)")
    c.add_argument("--grads", action="store_true", help="also compare the gradients of L")
    ap.add_argument("--hone", default=HONE, help="the hone executable (default: build/hone)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    {"goldens": write_goldens, "roundtrip": roundtrip, "checkpoint": checkpoint, "compare": compare}[args.mode](args)


if __name__ == "__main__":
    main()
