# Whether hone output files hold bitwise the same /steps and /validation (tests/unit/test_doc_numbers.cpp): every
# dataset but the machine's own measures (phase times, token rates, the generation tail's seconds).
#   python3 same_steps.py A.h5 B.h5 [C.h5 ...]     exit 0 when all equal A; else the differing datasets, exit 1
import sys

import h5py
import numpy as np


def machine_measure(name):
    return name.startswith("time/") or "tokens_per_s" in name or name == "generation/tail_s"


def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        for group in ("steps", "validation"):
            f[group].visititems(lambda n, o: out.__setitem__(f"{group}/{n}", o[()])
                                if isinstance(o, h5py.Dataset) and not machine_measure(n) else None)
    return out


first = datasets(sys.argv[1])
bad = []
for other in sys.argv[2:]:
    d = datasets(other)
    if set(d) != set(first):
        bad.append(f"{other}: other datasets: {sorted(set(d) ^ set(first))}")
    for name, v in first.items():
        if name in d and (v.shape != d[name].shape or v.tobytes() != d[name].tobytes()):
            bad.append(f"{other}: {name} differs")
print("\n".join(bad) if bad else f"same: {len(first)} datasets of {len(sys.argv) - 1} files")
sys.exit(1 if bad else 0)
