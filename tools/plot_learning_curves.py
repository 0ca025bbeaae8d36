#!/usr/bin/python3
"""hone's learning curves beside a reference run's, in one PNG.

Reads any number of hone output files (.h5: /validation/step and /validation/accuracy, /steps/step and
/steps/reward/mean, doc/output.md) and JSON lines logs of tools/reference_grpo.py (.jsonl: step,
validation_accuracy, reward_mean), and draws two panels: validation accuracy against the steps trained, and the
mean training reward per step (with a moving average when there are many steps).

  tools/plot_learning_curves.py out/smollm2-arithmetic.h5 out/smollm2-arithmetic-ref.jsonl -o curves.png
  tools/plot_learning_curves.py hone=out/a.h5 torch=out/ref.jsonl -o curves.png   # labels of your own

Needs Debian's python3-h5py, python3-numpy and python3-matplotlib (`make deps`), like tools/hone-report; the
#!/usr/bin/python3 line keeps it on Debian's Python whatever python3 comes first on PATH. h5py is needed only
for .h5 inputs.
"""

import argparse
import json
import math
import os
import sys


class Curves:
    def __init__(self, label):
        self.label = label
        self.val_step, self.val_acc = [], []
        self.step, self.reward = [], []


def read_hone(path, label):
    import h5py

    c = Curves(label)
    try:
        f = h5py.File(path, "r", locking=False)  # hone replaces the file by a rename: no lock is needed
    except OSError as e:
        sys.exit(f"{path}: cannot be opened as HDF5: {e}")
    with f:
        if "validation/step" in f and "validation/accuracy" in f:
            c.val_step = [int(x) for x in f["validation/step"][:]]
            c.val_acc = [float(x) for x in f["validation/accuracy"][:]]
        if "steps/step" in f and "steps/reward/mean" in f:
            c.step = [int(x) for x in f["steps/step"][:]]
            c.reward = [float(x) for x in f["steps/reward/mean"][:]]
    return c


def read_reference(path, label):
    c = Curves(label)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                sys.exit(f"{path}:{number}: invalid JSON: {e}")
            if "validation_accuracy" in row:
                c.val_step.append(int(row["step"]))
                c.val_acc.append(float(row["validation_accuracy"]))
            if "reward_mean" in row:
                c.step.append(int(row["step"]))
                c.reward.append(float(row["reward_mean"]))
    return c


def moving_average(values, width):
    out, window = [], []
    for v in values:
        window.append(v)
        if len(window) > width:
            window.pop(0)
        ok = [x for x in window if not math.isnan(x)]
        out.append(sum(ok) / len(ok) if ok else math.nan)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="FILE or LABEL=FILE; .h5 is a hone output file, else a reference log")
    ap.add_argument("-o", "--output", default="learning_curves.png")
    ap.add_argument("--title", default="")
    ap.add_argument("--smooth", type=int, default=5, help="moving-average width of the reward curves (1: off)")
    args = ap.parse_args(argv)

    runs = []
    for spec in args.runs:
        label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        if not os.path.isfile(path):
            sys.exit(f"{path}: no such file")
        hone = path.endswith((".h5", ".hdf5"))
        label = label or (os.path.basename(path) + (" (hone)" if hone else " (reference)"))
        runs.append(read_hone(path, label) if hone else read_reference(path, label))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_val, ax_rew) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, c in enumerate(runs):
        color = f"C{i}"
        if c.val_step:
            ax_val.plot(c.val_step, c.val_acc, "o-", color=color, label=c.label)
        if c.step:
            if args.smooth > 1 and len(c.step) > 2 * args.smooth:
                ax_rew.plot(c.step, c.reward, "-", color=color, alpha=0.3, linewidth=0.8)
                ax_rew.plot(c.step, moving_average(c.reward, args.smooth), "-", color=color,
                            label=f"{c.label} ({args.smooth}-step mean)")
            else:
                ax_rew.plot(c.step, c.reward, "-", color=color, label=c.label)
    ax_val.set_xlabel("steps trained")
    ax_val.set_ylabel("validation accuracy (greedy)")
    ax_val.set_ylim(-0.02, 1.02)
    ax_val.set_title("validation accuracy")
    ax_rew.set_xlabel("step")
    ax_rew.set_ylabel("mean reward of the step's samples")
    ax_rew.set_title("training reward")
    for ax in (ax_val, ax_rew):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    fig.savefig(args.output, dpi=120)
    print(f"{args.output}: {len(runs)} runs")


if __name__ == "__main__":
    main()
