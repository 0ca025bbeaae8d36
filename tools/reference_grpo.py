#!/usr/bin/env python3
"""A plain PyTorch + transformers GRPO run with hone's recipe, to set beside a `hone run` learning curve.

It follows input/smollm2-arithmetic.toml (and any deck with the same shape of recipe):

  data        the training JSONL in file order (data.shuffle = false), --prompts prompts per step, the stream
              wrapping to the start of the file at its end (src/data/prompt_source.cpp)
  prompt      one user message rendered by the tokenizer's own chat template with the generation prompt
              (tokenizer.chat_format = "auto", no tokenizer.system_prompt), encoded without special tokens
  generation  --generations samples per prompt at --temperature, top_p 1, top_k off, min_p off, up to
              --max-new-tokens, stopping at the tokenizer's and the model's EOS ids and the chat format's
              end-of-turn token (kept as the completion's last token and trained on)
  reward      hone's math answer checker (tools/hone_math_answer.py, a port of src/reward/math_answer*.cpp):
              1 when the extracted answer (boxed, ####, answer phrase, else the last number) equals the answer
  advantages  (r - mean) / (std + 1e-6) per group, std unbiased (G - 1), 0 for a group whose rewards are equal
  loss        the clipped PPO surrogate (clip 0.2 / 0.2), on-policy: the old logprobs are the training forward's
              own, detached, so the ratio is 1; token aggregation: the sum over every completion token of the
              step divided by the number of completion tokens of the step
  optimizer   one AdamW step per GRPO step (lr constant, betas 0.9 / 0.999, eps 1e-8, decoupled weight decay
              0.01 on the parameters of two or more dimensions only), after clipping the global gradient norm
              to 1.0; micro-batches accumulate into the one step
  validation  greedy, on the validation file's first --validation-samples problems, before the first step and
              every --validate-every steps after the step's update: accuracy = the fraction answered right
  precision   on CUDA fp32 master weights and AdamW moments, bf16 compute (torch.autocast), fp32 log-softmax
              and loss, like hone's GPU engine; on the CPU everything in fp32, like hone's CPU engine

One JSON object per line goes to --out (see LOG KEYS below), and one line per step to stdout.

  python3 tools/reference_grpo.py --model models/SmolLM2-135M-Instruct --out out/smollm2-arithmetic-ref.jsonl
  python3 tools/reference_grpo.py --tiny-random --tokenizer DIR --device cpu --steps 2 --prompts 2 \\
      --generations 2 --max-new-tokens 8 --out /tmp/ref.jsonl        # a smoke test without real weights

--model is a Hugging Face folder (e.g. from `hone convert --model X.gguf --output DIR`); everything is read
from local files only.
"""

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hone_math_answer  # noqa: E402

LOG_KEYS = """LOG KEYS (one object per line of --out):
  step                      the step (0: the validation before the first step)
  reward_mean, reward_std   mean and population standard deviation of the step's rewards (hone: reward/mean, std)
  accuracy                  fraction of the step's samples answered right (hone: accuracy)
  groups_with_signal        groups whose rewards are not all equal
  completion_tokens         completion tokens of the step (the loss denominator); completion_tokens_mean per sample
  truncation_rate           fraction of samples stopped by --max-new-tokens
  tokens                    prompt + completion tokens of the step
  loss, grad_norm, clip_fraction, lr
  time_generation, time_reward, time_training, time_total   seconds (time_total excludes validation, like hone)
  validation_accuracy, validation_reward_mean, validation_tokens_mean, validation_truncation_rate,
  time_validation           when the step validated
"""


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, epilog=LOG_KEYS,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="Hugging Face model folder (config.json, *.safetensors, tokenizer files)")
    ap.add_argument("--tokenizer", help="tokenizer folder (default: --model)")
    ap.add_argument("--tiny-random", action="store_true",
                    help="a 2-layer random Llama with the tokenizer's vocabulary instead of --model's weights")
    ap.add_argument("--train", default="input/data/arithmetic-train.jsonl")
    ap.add_argument("--validation", default="input/data/arithmetic-validation.jsonl")
    ap.add_argument("--prompt-key", default="prompt")
    ap.add_argument("--answer-key", default="answer")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--prompts", type=int, default=32, help="prompts per step")
    ap.add_argument("--generations", type=int, default=8, help="samples per prompt (the group)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--max-total-sequence-length", type=int, default=512,
                    help="prompts with prompt + max-new-tokens above this are skipped, as in hone")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=5e-6)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--adam-beta1", type=float, default=0.9)
    ap.add_argument("--adam-beta2", type=float, default=0.999)
    ap.add_argument("--adam-eps", type=float, default=1e-8)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--ratio-clip-min", type=float, default=0.2)
    ap.add_argument("--ratio-clip-max", type=float, default=0.2)
    ap.add_argument("--validate-every", type=int, default=10, help="0: never (besides --no-validate-at-start)")
    ap.add_argument("--no-validate-at-start", action="store_true")
    ap.add_argument("--validation-samples", type=int, default=200, help="the file's first N problems; 0: all")
    ap.add_argument("--max-tokens-per-microbatch", type=int, default=8192,
                    help="padded tokens per training micro-batch (bounds memory; the step stays one update)")
    ap.add_argument("--generation-batch", type=int, default=256, help="sequences per generate() call")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                    help="auto: bf16 autocast over fp32 weights on CUDA, fp32 on the CPU")
    ap.add_argument("--out", default="out/reference-grpo.jsonl")
    ap.add_argument("--self-test", action="store_true",
                    help="check the reward and advantages against hone's documented cases, then exit")
    args = ap.parse_args(argv)
    if args.self_test:
        return args
    if not args.model and not args.tiny_random:
        ap.error("--model is required (or --tiny-random with --tokenizer)")
    if args.tiny_random and not (args.tokenizer or args.model):
        ap.error("--tiny-random needs --tokenizer (or --model) for the tokenizer files")
    return args


# ---------------------------------------------------------------- data (src/data/dataset_jsonl.cpp)

def read_jsonl(path, prompt_key, answer_key):
    """[(messages, answer)] in file order; blank lines skipped, bad lines refused (data.skip_bad_lines = false)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                prompt, answer = obj[prompt_key], obj[answer_key]
            except (ValueError, KeyError) as e:
                sys.exit(f"{path}:{number}: {e}")
            messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
            out.append((messages, answer if isinstance(answer, str) else json.dumps(answer)))
    if not out:
        sys.exit(f"{path}: no prompts (the file is empty)")
    return out


class PromptStream:
    """hone's prompt stream without shuffling: position p of the stream is item p mod N (prompt_source.cpp)."""

    def __init__(self, items):
        self.items, self.position = items, 0

    def next_batch(self, n):
        batch = [self.items[(self.position + i) % len(self.items)] for i in range(n)]
        self.position += n
        return batch


# ---------------------------------------------------------------- advantages (src/rl/advantages.cpp)

def group_advantages(rewards, group_size, std_eps=1e-6):
    """(r - mean) / (std + eps) per group of group_size; std unbiased; 0 where the group's rewards are equal."""
    adv = [0.0] * len(rewards)
    for k in range(0, len(rewards), group_size):
        r = rewards[k:k + group_size]
        if min(r) == max(r):
            continue  # includes G = 1
        mean = sum(r) / len(r)
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / (len(r) - 1))
        for j, x in enumerate(r):
            adv[k + j] = (x - mean) / (std + std_eps)
    return adv


def self_test():
    bad = hone_math_answer.self_test()
    a = group_advantages([1.0, 0.0, 0.0, 0.0], 4)
    std = math.sqrt((0.75 ** 2 + 3 * 0.25 ** 2) / 3)
    if abs(a[0] - 0.75 / (std + 1e-6)) > 1e-12 or abs(a[1] + 0.25 / (std + 1e-6)) > 1e-12:
        print(f"advantages: {a}")
        bad += 1
    if group_advantages([0.5, 0.5], 2) != [0.0, 0.0] or group_advantages([1.0], 1) != [0.0]:
        print("advantages: equal rewards must give 0")
        bad += 1
    s = PromptStream(list(range(5)))
    if s.next_batch(3) != [0, 1, 2] or s.next_batch(3) != [3, 4, 0] or s.next_batch(3) != [1, 2, 3]:
        print("prompt stream: wrong order")
        bad += 1
    print("self-test:", "ok" if bad == 0 else f"{bad} failures")
    return bad


# ---------------------------------------------------------------- model side

def stop_token_ids(tokenizer, model_config):
    """The tokenizer's EOS, the model's EOS ids (config.json) and the chat format's end-of-turn token."""
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    eos = getattr(model_config, "eos_token_id", None)
    for e in (eos if isinstance(eos, (list, tuple)) else [eos]):
        if e is not None:
            ids.add(int(e))
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    for tok in ("<|im_end|>", "<|eot_id|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if tok in (template or "") and isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.add(tid)
    return sorted(ids)


def encode_prompt(tokenizer, messages):
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


class Rollout:
    __slots__ = ("prompt_ids", "completion", "text", "truncated", "answer", "reward", "correct")


def generate(model, tokenizer, torch, prompts, stops, pad_id, greedy, args, autocast):
    """Rollouts of [(prompt_ids, answer)], args.generation_batch sequences per generate() call, left padded."""
    from transformers import GenerationConfig

    cfg = GenerationConfig(
        do_sample=not greedy, num_beams=1, max_new_tokens=args.max_new_tokens, min_new_tokens=0,
        eos_token_id=stops, pad_token_id=pad_id, use_cache=True, repetition_penalty=1.0,
        no_repeat_ngram_size=0, length_penalty=1.0, renormalize_logits=False,
        **({} if greedy else dict(temperature=args.temperature, top_p=1.0, top_k=0, min_p=None, typical_p=1.0)))
    out = []
    device = next(model.parameters()).device
    for b in range(0, len(prompts), args.generation_batch):
        chunk = prompts[b:b + args.generation_batch]
        width = max(len(p) for p, _ in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, (p, _) in enumerate(chunk):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        with torch.no_grad(), autocast():
            seqs = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=cfg)
        gen = seqs[:, width:].tolist()
        for (p, answer), g in zip(chunk, gen):
            r = Rollout()
            end = next((k + 1 for k, t in enumerate(g) if t in stops), None)
            r.prompt_ids, r.answer = p, answer
            r.truncated = end is None
            r.completion = g[:end] if end is not None else g[:args.max_new_tokens]
            r.text = tokenizer.decode(r.completion, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            out.append(r)
    return out


def score(rollouts):
    for r in rollouts:
        r.reward, r.correct = hone_math_answer.reward(r.text, r.answer)


def microbatches(rollouts, budget):
    """Consecutive runs of rollouts whose padded size (count x longest) stays within budget tokens."""
    batch, longest = [], 0
    for i, r in enumerate(rollouts):
        n = len(r.prompt_ids) + len(r.completion)
        if batch and max(longest, n) * (len(batch) + 1) > budget:
            yield batch
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, n)
    if batch:
        yield batch


def train_step(model, optimizer, torch, rollouts, advantages, pad_id, args, autocast):
    """One GRPO training phase: the policy loss over every completion token, one AdamW step. Returns metrics."""
    device = next(model.parameters()).device
    denominator = sum(len(r.completion) for r in rollouts)  # valid tokens of the whole step (hone's D)
    optimizer.zero_grad(set_to_none=True)
    loss_sum, clipped, valid = 0.0, 0, 0
    if denominator == 0:
        return {"loss": 0.0, "grad_norm": 0.0, "clip_fraction": 0.0}
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    head = model.get_output_embeddings()
    for idx in microbatches(rollouts, args.max_tokens_per_microbatch):
        width = max(len(rollouts[i].prompt_ids) + len(rollouts[i].completion) for i in idx)
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        attn = torch.zeros((len(idx), width), dtype=torch.long)
        target = torch.zeros((len(idx), width), dtype=torch.bool)  # position t predicts token t + 1
        adv = torch.zeros((len(idx), width), dtype=torch.float32)
        for row, i in enumerate(idx):
            r = rollouts[i]
            seq = r.prompt_ids + r.completion
            ids[row, :len(seq)] = torch.tensor(seq)
            attn[row, :len(seq)] = 1
            target[row, len(r.prompt_ids) - 1:len(seq) - 1] = True
            adv[row] = advantages[i]
        ids, attn, target, adv = ids.to(device), attn.to(device), target.to(device), adv.to(device)
        with autocast():
            hidden = base(input_ids=ids, attention_mask=attn).last_hidden_state
            h = hidden[target]  # [completion tokens, hidden]
            logits = head(h)
        logp_all = torch.log_softmax(logits.float() / args.temperature, dim=-1)
        next_ids = torch.roll(ids, shifts=-1, dims=1)[target]
        new = logp_all.gather(-1, next_ids[:, None])[:, 0]
        old = new.detach()  # on-policy: one optimizer step per GRPO step
        a = adv[target]
        ratio = torch.exp(new - old)
        unclipped = -a * ratio
        clipped_pg = -a * torch.clamp(ratio, 1.0 - args.ratio_clip_min, 1.0 + args.ratio_clip_max)
        is_clipped = clipped_pg > unclipped
        pg = torch.where(is_clipped, clipped_pg, unclipped)
        loss = pg.sum() / denominator
        loss.backward()
        loss_sum += float(loss.detach())
        clipped += int(is_clipped.sum())
        valid += int(target.sum())
    # Global-norm clipping (src/train/grad_clip.cpp): scale by max / (norm + 1e-6) only when norm > max.
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))
    if not math.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)  # hone skips a non-finite update (train.max_nonfinite_updates)
    else:
        if args.max_grad_norm > 0 and norm > args.max_grad_norm:
            coef = args.max_grad_norm / (norm + 1e-6)
            for g in grads:
                g.mul_(coef)
        optimizer.step()
    return {"loss": loss_sum, "grad_norm": norm, "clip_fraction": clipped / max(valid, 1)}


def build(args, torch):
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok_dir = args.tokenizer or args.model
    tokenizer = AutoTokenizer.from_pretrained(tok_dir, local_files_only=True)
    if not tokenizer.chat_template:
        sys.exit(f"{tok_dir}: the tokenizer has no chat template")
    if args.tiny_random:
        torch.manual_seed(args.seed)
        eos = tokenizer.eos_token_id
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                             tie_word_embeddings=True, eos_token_id=eos, bos_token_id=tokenizer.bos_token_id,
                             pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos)
        model = LlamaForCausalLM(config)
    else:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, local_files_only=True)
    from transformers import GenerationConfig
    model.generation_config = GenerationConfig()  # nothing from generation_config.json: every value is ours
    model.to(args.device)
    return tokenizer, model


def adamw(model, torch, args):
    """AdamW with hone's decay rule (src/train/adamw.cpp): parameters of 2+ dimensions decayed, 1-D ones not."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=args.lr, betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_eps,
                             foreach=False, fused=False)


def main(argv=None):
    args = parse_args(argv)
    if args.self_test:
        sys.exit(1 if self_test() else 0)
    import contextlib

    import torch

    torch.manual_seed(args.seed)
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    tokenizer, model = build(args, torch)
    bf16 = args.precision == "bf16" or (args.precision == "auto" and args.device.startswith("cuda"))
    device_type = "cuda" if args.device.startswith("cuda") else "cpu"

    def autocast():
        return torch.autocast(device_type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def sync():
        if device_type == "cuda":
            torch.cuda.synchronize()

    stops = stop_token_ids(tokenizer, model.config)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    limit = args.max_total_sequence_length - args.max_new_tokens

    def encode(items):
        return [(encode_prompt(tokenizer, messages), answer) for messages, answer in items]

    def fits(item):  # hone skips such a prompt at generation (prompts_too_long); it keeps its place in the stream
        return 0 < len(item[0]) <= limit

    train = encode(read_jsonl(args.train, args.prompt_key, args.answer_key))
    val_items = read_jsonl(args.validation, args.prompt_key, args.answer_key) if args.validation else []
    if args.validation_samples > 0:
        val_items = val_items[:args.validation_samples]
    validation = [item for item in encode(val_items) if fits(item)]
    stream = PromptStream(train)
    optimizer = adamw(model, torch, args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    log = open(args.out, "w", encoding="utf-8")
    print(f"reference_grpo: {len(train)} training prompts, {len(validation)} validation problems, stop ids {stops}, "
          f"{'bf16 autocast' if bf16 else 'fp32'} on {args.device}", flush=True)

    def validate(step):
        sync()
        t0 = time.perf_counter()
        model.eval()
        rs = generate(model, tokenizer, torch, validation, stops, pad_id, True, args, autocast)
        score(rs)
        sync()
        n = max(len(rs), 1)
        v = {"validation_accuracy": sum(r.correct for r in rs) / n,
             "validation_reward_mean": sum(r.reward for r in rs) / n,
             "validation_tokens_mean": sum(len(r.completion) for r in rs) / n,
             "validation_truncation_rate": sum(r.truncated for r in rs) / n,
             "time_validation": time.perf_counter() - t0}
        print(f"validation at step {step}: accuracy {v['validation_accuracy']:.4f}, "
              f"reward {v['validation_reward_mean']:.4f}, {v['validation_tokens_mean']:.1f} tokens, "
              f"truncated {v['validation_truncation_rate']:.3f}; {len(rs)} problems in {v['time_validation']:.2f} s",
              flush=True)
        return v

    if validation and not args.no_validate_at_start:
        log.write(json.dumps({"step": 0, **validate(0)}) + "\n")
        log.flush()
    for step in range(1, args.steps + 1):
        sync()
        t_step = time.perf_counter()
        model.eval()
        batch = [item for item in stream.next_batch(args.prompts) if fits(item)]
        if not batch:
            sys.exit(f"step {step}: every prompt is longer than --max-total-sequence-length - --max-new-tokens")
        prompts = [item for item in batch for _ in range(args.generations)]  # groups contiguous
        rollouts = generate(model, tokenizer, torch, prompts, stops, pad_id, False, args, autocast)
        sync()
        t_gen = time.perf_counter()
        score(rollouts)
        rewards = [r.reward for r in rollouts]
        advantages = group_advantages(rewards, args.generations)
        t_reward = time.perf_counter()
        model.train()
        m = train_step(model, optimizer, torch, rollouts, advantages, pad_id, args, autocast)
        sync()
        t_end = time.perf_counter()
        n = len(rollouts)
        mean = sum(rewards) / n
        comp = sum(len(r.completion) for r in rollouts)
        row = {
            "step": step,
            "reward_mean": mean,
            "reward_std": math.sqrt(sum((x - mean) ** 2 for x in rewards) / n),
            "accuracy": sum(r.correct for r in rollouts) / n,
            "groups_with_signal": sum(1 for k in range(0, n, args.generations)
                                      if len(set(rewards[k:k + args.generations])) > 1),
            "completion_tokens": comp,
            "completion_tokens_mean": comp / n,
            "truncation_rate": sum(r.truncated for r in rollouts) / n,
            "tokens": comp + sum(len(r.prompt_ids) for r in rollouts),
            "loss": m["loss"], "grad_norm": m["grad_norm"], "clip_fraction": m["clip_fraction"], "lr": args.lr,
            "time_generation": t_gen - t_step, "time_reward": t_reward - t_gen, "time_training": t_end - t_reward,
            "time_total": t_end - t_step,
        }
        print(f"step {step}/{args.steps}: reward {row['reward_mean']:.4f} accuracy {row['accuracy']:.4f} "
              f"tokens {row['completion_tokens_mean']:.1f} truncated {row['truncation_rate']:.3f} "
              f"grad_norm {row['grad_norm']:.4f} time {row['time_total']:.2f} s "
              f"(generation {row['time_generation']:.2f}, training {row['time_training']:.2f})", flush=True)
        if validation and args.validate_every > 0 and step % args.validate_every == 0:
            row.update(validate(step))
        log.write(json.dumps(row) + "\n")
        log.flush()
        if step == 1 or step % 10 == 0:
            r = rollouts[0]
            print(f"  sample: {tokenizer.decode(r.prompt_ids)!r} -> {r.text!r} (answer {r.answer}, reward {r.reward})",
                  flush=True)
    log.close()


if __name__ == "__main__":
    main()
