#!/usr/bin/python3
# make soak: the CPU demo (input/demo.toml) for 2,000 steps with checkpoint.every = 7, killed with SIGKILL at 20
# seeded random moments and resumed (run.resume = auto) each time, against the same run left alone. Checks:
#   - after every kill the output HDF5 file opens and its steps are 1..n (no gap, no repeat), and every checkpoint
#     resume could pick is whole (the marker's sizes and hashes);
#   - at the end the killed run's file holds steps 1..2000 exactly once, and its final weights and optimizer state
#     (the checkpoint at step 2000) are bitwise those of the uninterrupted run, as are its deterministic metrics.
# Prints one line per kill and a summary; exit 0 when every check passed. Not part of make test (minutes to hours).
#   mk/soak.py --hone build/hone --dir build/soak [--steps 2000] [--kills 20] [--every 7] [--seed 2026]
# Needs Debian's python3-h5py (make deps), like tools/hone-report.
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

DETERMINISTIC = ["reward/mean", "reward/std", "accuracy", "loss", "entropy", "clip_fraction", "grad_norm", "lr",
                 "generated_tokens/mean", "token_mult_prob_error"]


def run_args(args, out_dir, ck_dir, steps):
    return [args.hone, "run", args.deck, "run.name=soak", f"run.max_steps={steps}", f"run.seed={args.run_seed}",
            "run.resume=auto", f"checkpoint.every={args.every}", "checkpoint.keep=2", f"output.dir={out_dir}",
            f"checkpoint.dir={ck_dir}", "output.overwrite=true", "checkpoint.overwrite=true"]


def read_steps(h5):
    """The /steps/step of the output file; raises when the file does not open or lacks it."""
    with h5py.File(h5, "r") as f:
        return [int(x) for x in f["steps/step"][:]]


def fnv1a64(path):
    h = 14695981039346656037
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            for b in chunk:
                h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def complete_checkpoints(ck_dir):
    """Checkpoints resume could pick (a COMPLETE marker whose listed files have their sizes), checked whole."""
    found = []
    if not os.path.isdir(ck_dir):
        return found
    for name in sorted(os.listdir(ck_dir)):
        if not name.startswith("step_"):
            continue
        folder = os.path.join(ck_dir, name)
        try:
            marker = json.load(open(os.path.join(folder, "COMPLETE")))
        except (OSError, ValueError):
            continue  # never completed: ignored by resume
        files = marker.get("files", [])
        if not all(os.path.exists(os.path.join(folder, f["path"])) and
                   os.path.getsize(os.path.join(folder, f["path"])) == f["bytes"] for f in files):
            continue
        for f in files:
            if "fnv1a64" in f and fnv1a64(os.path.join(folder, f["path"])) != f["fnv1a64"]:
                raise AssertionError(f"{folder}: {f['path']} does not match its marker's hash")
        found.append(int(marker["step"]))
    return found


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hone", default="build/hone")
    p.add_argument("--deck", default="input/demo.toml")
    p.add_argument("--dir", default="build/soak")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--every", type=int, default=7)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--run-seed", type=int, default=1234)
    args = p.parse_args()

    shutil.rmtree(args.dir, ignore_errors=True)
    ref, soak = os.path.join(args.dir, "ref"), os.path.join(args.dir, "killed")
    os.makedirs(ref)
    os.makedirs(soak)
    t_start = time.time()

    # The uninterrupted run; its duration sets the scale of the kill moments.
    t0 = time.time()
    with open(os.path.join(ref, "log"), "w") as log:
        rc = subprocess.call(run_args(args, os.path.join(ref, "out"), os.path.join(ref, "ck"), args.steps),
                             stdout=log, stderr=subprocess.STDOUT)
    ref_seconds = time.time() - t0
    if rc != 0:
        sys.exit(f"soak: the uninterrupted run failed (exit {rc}, see {ref}/log)")
    print(f"soak: uninterrupted run of {args.steps} steps: {ref_seconds:.0f} s", flush=True)

    # The killed run: each attempt resumes and is killed after a seeded random delay, uniform in (0, 2 x an equal
    # share of the time the remaining steps took uninterrupted] (at most 80 % of that time, so that the run does
    # not reach its end before the last kill: steps grow shorter as the demo learns, and a fixed scale let it), so
    # that the kills fall anywhere in a step (generation, training, the HDF5 rewrite, a checkpoint) and the run
    # still advances.
    rng = random.Random(args.seed)
    done = 0  # steps in the killed run's output
    out_dir, ck_dir = os.path.join(soak, "out"), os.path.join(soak, "ck")
    h5 = os.path.join(out_dir, "soak.h5")
    failures = []
    cmd = run_args(args, out_dir, ck_dir, args.steps)
    for k in range(1, args.kills + 1):
        remaining = ref_seconds * (args.steps - done) / args.steps
        delay = rng.uniform(0.05, max(0.1, min(2.0 * remaining / (args.kills - k + 1), 0.8 * remaining)))
        with open(os.path.join(soak, f"log.{k}"), "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            try:
                proc.wait(timeout=delay)
                finished = True
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                finished = False
        if finished:
            failures.append(f"kill {k}: the run ended (exit {proc.returncode}) before its kill after {delay:.2f} s")
            break
        try:
            steps = read_steps(h5) if os.path.exists(h5) else []
            ok = steps == list(range(1, len(steps) + 1))
            cks = complete_checkpoints(ck_dir)
        except Exception as e:  # the file does not open, or a checkpoint is damaged
            failures.append(f"kill {k} after {delay:.2f} s: {e}")
            break
        newest = max(cks) if cks else 0
        done = len(steps)
        print(f"soak: kill {k:2d} after {delay:6.2f} s: output steps 1..{len(steps)}{'' if ok else ' (NOT 1..n)'}, "
              f"newest complete checkpoint step {newest}", flush=True)
        if not ok:
            failures.append(f"kill {k}: the output's steps are not 1..n: {steps[:5]}...{steps[-5:]}")
            break

    # The last start runs to the end.
    if not failures:
        with open(os.path.join(soak, "log.final"), "w") as log:
            rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
        if rc != 0:
            failures.append(f"the final resume failed (exit {rc}, see {soak}/log.final)")

    if not failures:
        steps = read_steps(h5)
        if steps != list(range(1, args.steps + 1)):
            failures.append(f"the output holds {len(steps)} rows, not steps 1..{args.steps} exactly once")
        last = f"step_{args.steps:08d}"
        for f in ["model.safetensors", "optimizer.safetensors", "state.json"]:
            a, b = os.path.join(ref, "ck", last, f), os.path.join(ck_dir, last, f)
            if not (os.path.exists(a) and os.path.exists(b)) or sha256(a) != sha256(b):
                failures.append(f"{last}/{f} differs from the uninterrupted run's")
        with h5py.File(os.path.join(ref, "out", "soak.h5"), "r") as fa, h5py.File(h5, "r") as fb:
            for m in DETERMINISTIC:
                va, vb = fa["steps/" + m][:], fb["steps/" + m][:]
                if not np.array_equal(va, vb, equal_nan=True):
                    failures.append(f"metric {m} differs from the uninterrupted run's")

    total = time.time() - t_start
    if failures:
        print("soak: FAILED: " + "; ".join(failures))
        sys.exit(1)
    print(f"soak: passed: {args.kills} kills, steps 1..{args.steps} exactly once, the output readable after every "
          f"kill, final weights and optimizer state bitwise equal to the uninterrupted run; {total:.0f} s in all "
          f"({ref_seconds:.0f} s uninterrupted)")


if __name__ == "__main__":
    main()
