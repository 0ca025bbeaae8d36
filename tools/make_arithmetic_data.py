#!/usr/bin/env python3
"""Two-digit arithmetic word problems for hone's JSONL prompt reader.

Writes one {"prompt": ..., "answer": ...} object per line (doc/data-and-rewards.md, "JSONL prompt files"):

    {"prompt": "What is 41 + 29? Reply with the number only.", "answer": "70"}

Operands are 10..99, the operator + or - (a difference is never negative), and the question comes in a few
phrasings (a bare sum, an imperative, a short story). The answer is a whole number, scored by hone's math checker
on the last number of the completion (reward.fallback_last_number). Training and validation problems are disjoint:
no (operand, operator, operand) triple of the validation file occurs in the training file.

The output is a pure function of --seed and the counts (Python's random.Random, standard library only), so the
committed files under input/data/ can be checked with

    python3 tools/make_arithmetic_data.py --check
"""

import argparse
import json
import os
import random
import sys

SUFFIX = "Reply with the number only."
NAMES = ["Tom", "Anna", "Maria", "Ben", "Lucy", "Omar", "Kenji", "Sara"]
THINGS = ["apples", "marbles", "stickers", "books", "coins", "pencils", "cards", "shells"]


def phrase(rng, a, op, b):
    """One problem's prompt text. The draw order is fixed: changing it changes every file."""
    style = rng.random()
    if style < 0.6:
        return f"What is {a} {op} {b}? {SUFFIX}"
    if style < 0.8:
        verb = rng.choice(["Calculate", "Compute", "Work out"])
        return f"{verb} {a} {op} {b}. {SUFFIX}"
    name = rng.choice(NAMES)
    thing = rng.choice(THINGS)
    if op == "+":
        return (f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now? {SUFFIX}")
    return (f"{name} has {a} {thing} and gives away {b}. How many {thing} does {name} have left? {SUFFIX}")


def draw_triple(rng):
    op = rng.choice("+-")
    a = rng.randint(10, 99)
    b = rng.randint(10, 99)
    if op == "-" and b > a:
        a, b = b, a
    return a, op, b


def make(seed, n_train, n_validation):
    """(train, validation): lists of (prompt, answer) with disjoint triples and no triple twice."""
    rng = random.Random(seed)
    seen = set()
    out = []
    while len(out) < n_validation + n_train:
        a, op, b = draw_triple(rng)
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        answer = a + b if op == "+" else a - b
        out.append((phrase(rng, a, op, b), str(answer)))
    return out[n_validation:], out[:n_validation]


def lines(problems):
    return "".join(json.dumps({"prompt": p, "answer": a}) + "\n" for p, a in problems)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_dir = os.path.join(os.path.dirname(here), "input", "data")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--train", type=int, default=4000, help="training problems (default 4000)")
    ap.add_argument("--validation", type=int, default=200, help="validation problems (default 200)")
    ap.add_argument("--out-dir", default=default_dir, help="folder of the two files (default input/data)")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out-dir instead of writing")
    args = ap.parse_args()
    if args.train + args.validation > 12000:
        sys.exit("make_arithmetic_data: at most 12000 distinct problems in all")

    train, validation = make(args.seed, args.train, args.validation)
    files = {"arithmetic-train.jsonl": lines(train), "arithmetic-validation.jsonl": lines(validation)}
    if args.check:
        bad = 0
        for name, text in files.items():
            path = os.path.join(args.out_dir, name)
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except OSError as e:
                print(f"{path}: {e}", file=sys.stderr)
                same = False
            if not same:
                print(f"{path}: differs from what tools/make_arithmetic_data.py writes", file=sys.stderr)
                bad += 1
        sys.exit(1 if bad else 0)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, text in files.items():
        path = os.path.join(args.out_dir, name)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        print(f"{path}: {text.count(chr(10))} problems, {len(text.encode())} bytes")


if __name__ == "__main__":
    main()
