#!/usr/bin/python3
# The numbers the docs quote from demo runs, regenerated: runs input/demo.toml for the deck's seed (1234) and seeds
# 2, 3, 4 (in parallel, one thread each: the CPU engine's results do not depend on the thread count), then writes or
# checks the marked fragments of doc/quickstart.md and doc/report.md (<!-- demo-numbers NAME --> ... <!--
# /demo-numbers -->): the demo's stdout, its validation curve, its reward, and the report example.
#   mk/demo-numbers.py --hone build/hone --write      rewrite the fragments from fresh runs
#   mk/demo-numbers.py --hone build/hone --check      exit 1 naming every fragment that differs (make test runs it)
# Times and token rates are the machine's, not the run's: --check compares every other number (steps, rewards,
# accuracies, token counts) and masks those. The runs use OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE), so that the
# numbers are the same on every x86-64 CPU with AVX2.
import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = [1234, 2, 3, 4]
MARK = re.compile(r"(<!-- demo-numbers (\w+) -->\n)(.*?)(<!-- /demo-numbers -->)", re.S)


def run_demos(hone, folder):
    procs = {}
    # One OpenBLAS kernel on every x86 CPU: Debian's OpenBLAS picks its sgemm kernel by CPU (Zen, Haswell, SkylakeX,
    # ...), and each kernel rounds a product its own way, so without this the rewards after the first steps would
    # differ in their last digits from one machine to the next.
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE="Haswell")
    for seed in SEEDS:
        log = open(os.path.join(folder, f"seed{seed}.txt"), "w")
        procs[seed] = (subprocess.Popen([hone, "run", os.path.join(ROOT, "input/demo.toml"), f"run.seed={seed}",
                                         f"output.dir={folder}/out{seed}", f"checkpoint.dir={folder}/ck{seed}"],
                                        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder), log)
    for seed, (p, log) in procs.items():
        if p.wait() != 0:
            sys.exit(f"demo-numbers: the demo for seed {seed} failed; see {log.name}")
        log.close()


def read(folder, seed):
    import h5py
    with h5py.File(os.path.join(folder, f"out{seed}", "demo.h5"), "r") as f:
        return f["steps/reward/mean"][()], f["validation/step"][()], f["validation/accuracy"][()]


def stdout_fragment(folder):
    lines = open(os.path.join(folder, "seed1234.txt")).read().splitlines()
    val = {int(re.match(r"validation at step (\d+):", l).group(1)): l for l in lines if l.startswith("validation at step")}
    header = next(l for l in lines if l.lstrip().startswith("step "))
    steps = {int(l.split()[0]): l for l in lines if re.match(r"^ +\d+ ", l)}
    last = max(steps)
    out = [val[0], header, steps[1], steps[2], "      ...", val[10], "      ...", steps[last], val[last]]
    return "```\n" + "\n".join(out) + "\n```\n"


def words_for_curve(steps, acc):
    """'0 at step 0, 0.12 at steps 10 and 20, ..., and 1.0 from step 60 on'"""
    def num(v):
        t = f"{v:.2f}".rstrip("0").rstrip(".")
        return t if "." in t or t == "0" else t + ".0"
    runs = []
    for s, a in zip(steps, acc):
        if runs and runs[-1][0] == a:
            runs[-1][1].append(int(s))
        else:
            runs.append((a, [int(s)]))
    parts = []
    for i, (a, ss) in enumerate(runs):
        if i == len(runs) - 1 and len(ss) > 1:
            parts.append(f"{num(a)} from step {ss[0]} on")
        elif len(ss) == 1:
            parts.append(f"{num(a)} at {'step ' if i == 0 else ''}{ss[0]}")
        elif len(ss) == 2:
            parts.append(f"{num(a)} at steps {ss[0]} and {ss[1]}")
        else:
            parts.append(f"{num(a)} at steps {ss[0]} to {ss[-1]}")
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def paragraph(text):
    return textwrap.fill(text, width=117, break_on_hyphens=False, break_long_words=False) + "\n"


def validation_fragment(folder):
    _, steps, acc = read(folder, 1234)
    return paragraph(f"The validation is greedy accuracy on 100 reverse problems drawn apart from the training stream "
                     f"(`[validation]` in the deck): measured for the deck's seed, {words_for_curve(steps, acc)} "
                     f"(`tools/hone-report out/demo.h5` draws it as `out/demo-report/val_accuracy.png`).")


def rewards_fragment(folder):
    first, last = [], []
    for seed in SEEDS:
        r, _, _ = read(folder, seed)
        first.append(sum(r[:5]) / 5)
        last.append(sum(r[-10:]) / 10)
    above = int(min(last) * 10) / 10
    return paragraph(f"The mean reward starts near {max(first):.2f} and ends above {above:.1f}: measured for the deck's "
                     f"seed 1234 and seeds 2, 3, 4, the mean of the first 5 steps was {min(first):.3f} to "
                     f"{max(first):.3f} and that of the last 10 of 80 steps {', '.join(f'{v:.2f}' for v in last)}.")


def report_fragment(folder):
    tool = os.path.join(ROOT, "tools/hone-report")
    h5 = os.path.join(folder, "out1234", "demo.h5")
    table = subprocess.run(["/usr/bin/python3", tool, h5, "--no-plots"], capture_output=True, text=True, check=True)
    csv = subprocess.run(["/usr/bin/python3", tool, h5, "--steps", "79-", "--csv", "--no-plots"], capture_output=True,
                         text=True, check=True)
    return ("```\n$ tools/hone-report out/demo.h5\n" + table.stdout +
            "hone-report: no run recorded 'kl'; kl.png not drawn\nwrote out/demo-report/reward.png\n...\n"
            "wrote out/demo-report/val_accuracy.png\n$ tools/hone-report out/demo.h5 --steps 79- --csv --no-plots\n" +
            csv.stdout + "```\n")


FRAGMENTS = {"stdout": stdout_fragment, "validation": validation_fragment, "rewards": rewards_fragment,
             "report": report_fragment}
FILES = ["doc/quickstart.md", "doc/report.md"]


def masked(text):
    """The fragment without what the machine decides: phase times, token rates, validation seconds."""
    out = []
    header = None
    for line in text.splitlines():
        w = line.split()
        if re.match(r"^ +\d+ ", line) and len(w) == 11:  # a step line: step, 6 times, reward, kl, 2 rates
            line = " ".join([w[0], "*", w[7], w[8]])
        elif line.startswith("validation at step"):
            line = re.sub(r"in [0-9.e-]+ s$", "in * s", line)
        elif line.startswith("run,"):
            header = line.split(",")
        elif header and line.startswith("demo,"):
            c = line.split(",")
            line = ",".join(v if not (h.endswith("_s") or h.endswith("_per_s")) else "*" for h, v in zip(header, c))
        elif line.startswith("run ") and "total_s" in line:
            header = None
            cols = w
        elif line.startswith("demo "):
            # "demo STEP ..." or "demo mean A-B ...": the columns after the step, named as the header names them
            vals = w[3:] if w[1] == "mean" else w[2:]
            names = cols[2:]
            line = " ".join(w[:len(w) - len(vals)] +
                            [v if not (n.endswith("_s") or n.endswith("_per_s")) else "*" for n, v in zip(names, vals)])
        out.append(line)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hone", default=os.path.join(ROOT, "build/hone"))
    ap.add_argument("--dir", default=None, help="where the runs go (default: a temporary folder)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    a = ap.parse_args()
    folder = a.dir or tempfile.mkdtemp(prefix="hone-demo-numbers-")
    os.makedirs(folder, exist_ok=True)
    run_demos(os.path.abspath(a.hone), folder)
    fresh = {name: f(folder) for name, f in FRAGMENTS.items()}
    bad, seen = [], set()
    for rel in FILES:
        path = os.path.join(ROOT, rel)
        text = open(path).read()

        def replace(m):
            name = m.group(2)
            seen.add(name)
            if masked(m.group(3)) != masked(fresh[name]):
                bad.append(f"{rel}: fragment '{name}' differs from the runs:\n--- the doc\n{m.group(3)}--- the runs\n"
                           f"{fresh[name]}")
            return m.group(1) + fresh[name] + m.group(4)
        new = MARK.sub(replace, text)
        if a.write and new != text:
            open(path, "w").write(new)
    missing = sorted(set(FRAGMENTS) - seen)
    if missing:
        bad.append(f"fragments without a place in {', '.join(FILES)}: {', '.join(missing)}")
    if a.write:
        print(f"demo-numbers: fragments written from the runs in {folder}")
        return 0 if not missing else 1
    if bad:
        print("\n".join(bad))
        return 1
    print(f"demo-numbers: every quoted number matches the runs in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
