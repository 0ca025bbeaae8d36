#!/usr/bin/env python3
"""An example reward for hone's reward.command: 1 when the completion's first line is the answer, else 0.

hone starts this script once on every rank that scores rollouts and sends it, for every rollout of a batch, one
JSON line on stdin:
    {"prompt": "rev:7=", "messages": [...], "completion": "7", "answer": "7", "extra": {...}, "id": 12,
     "step": 3, "completion_tokens": 1, "finish_reason": "length", "batch_index": 0, "batch_size": 256}
and reads one reply line per request, in order, on stdout: a number, or an object whose "reward" is the reward,
"correct" (optional) says whether the answer is right, and any other field is a named sub-score that hone keeps
per rollout and as the metric scores/<name>:
    {"reward": 1.0, "correct": true, "answered": 1, "chars": 1}

Print anything else (debugging) to stderr: hone keeps its last lines for the error message if this script dies.
hone closes stdin when the run ends; the loop below then ends. To score a whole batch at once (a judge model, a
pool of sandboxes), read batch_size lines before answering them.

Use it in a deck:
    [reward]
    command = "python3 examples/reward/exact_match.py"
"""
import json
import sys


def score(request):
    # The model's answer: the completion up to its first newline, spaces trimmed (as hone's synthetic tasks read it).
    given = request["completion"].split("\n", 1)[0].strip()
    correct = given != "" and given == request["answer"].strip()
    return {"reward": 1.0 if correct else 0.0, "correct": correct, "answered": int(given != ""),
            "chars": len(request["completion"])}


def main():
    for line in sys.stdin:
        reply = score(json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        # One reply per request, at once: hone waits for the whole batch, so nothing may stay in a buffer.
        sys.stdout.flush()


if __name__ == "__main__":
    main()
