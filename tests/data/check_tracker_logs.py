# Reads one tracker's local files back with that tracker's own reader and compares them with the hone output file
# they came from (tests/unit/test_hone_log.cpp): every finite /steps and /validation value, under hone-log's names.
#   python check_tracker_logs.py tensorboard|mlflow|wandb FILE.h5 LOG_DIR [RUN_NAME]
# Prints "ok: N values" (exit 0) or the first differences (exit 1).
import glob
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

tracker, h5, log_dir = sys.argv[1], sys.argv[2], sys.argv[3]
run_name = sys.argv[4] if len(sys.argv) > 4 else "demo"
here = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("hone_log", os.path.join(here, "..", "..", "tools", "hone-log"))
spec = importlib.util.spec_from_loader("hone_log", loader)
hone_log = importlib.util.module_from_spec(spec)
loader.exec_module(hone_log)

steps, validation, _ = hone_log.read_rows(h5)
expected = {}  # (name, step) -> value
for rows, is_val in ((steps, False), (validation, True)):
    for step, values in rows:
        for k, v in values.items():
            expected[(hone_log.tracker_name(k, is_val), step)] = v

got = {}
if tracker == "tensorboard":
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(os.path.join(log_dir, "tensorboard", run_name), size_guidance={"scalars": 0})
    ea.Reload()
    for tag in ea.Tags()["scalars"]:
        for e in ea.Scalars(tag):
            got[(tag, e.step)] = e.value
    rel = 1e-6  # simple_value is a float32
elif tracker == "mlflow":
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from mlflow.store.tracking.file_store import FileStore
    store = FileStore(os.path.join(log_dir, "mlruns"))
    exp = store.get_experiment_by_name("hone")
    runs = store.search_runs([exp.experiment_id], "", run_view_type=1)
    assert len(runs) == 1, f"{len(runs)} MLflow runs"
    run = runs[0]
    assert run.info.run_name == run_name, run.info.run_name
    for key in run.data.metrics:
        for m in store.get_metric_history(run.info.run_id, key):
            got[(key, m.step)] = m.value
    rel = 0
elif tracker == "wandb":
    wandb_bin = os.path.join(os.path.dirname(sys.executable), "wandb")
    runs = glob.glob(os.path.join(log_dir, "wandb", "offline-run-*"))
    assert len(runs) == 1, f"{len(runs)} W&B offline runs"
    out = subprocess.run([wandb_bin, "leet", "inspect", "--json", runs[0]], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        rec = json.loads(line)
        if rec.get("type") != "history":
            continue
        item = rec["history"]["item"]
        for k, v in item.items():
            if not k.startswith("_"):
                got[(k, int(item["_step"]))] = v
    rel = 0
else:
    sys.exit(f"unknown tracker {tracker}")

bad = []
for key, v in sorted(expected.items()):
    if key not in got:
        bad.append(f"missing {key}")
    elif abs(got[key] - v) > rel * abs(v) + (1e-30 if rel else 0):
        bad.append(f"{key}: {got[key]} != {v}")
extra = sorted(set(got) - set(expected))
if extra:
    bad.append(f"not in the file: {extra[:5]}")
if bad or not expected:
    print("\n".join(bad[:20]) or "the file has no values")
    sys.exit(1)
print(f"ok: {len(expected)} values")
