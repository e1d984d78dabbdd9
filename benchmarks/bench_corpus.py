"""Corpus-stage benchmark: build the full corpus from a LongMemEval_S-shaped file.

Prints, measured side by side in one run: wall time of `eval-pipeline corpus` as a ratio
to a plain `json.load` of the same file, and the peak RSS of each (targets: ratio <= 3,
peak RSS <= 600 MB). Each measurement runs in its own process so peak RSS is its own.

    .venv/bin/python -m benchmarks.bench_corpus [--questions 500] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval_pipeline.corpus.generate import generate
from eval_pipeline.settings import state_dir

TARGET_RATIO = 3.0
TARGET_RSS_MB = 600.0


def measure(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed: {cmd}\n{proc.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    data = state_dir() / "bench" / f"longmemeval_s_generated_q{args.questions}_s{args.seed}.json"
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        stats = generate(data, questions=args.questions, seed=args.seed)
        print(f"generated {data} in {time.perf_counter() - t:.1f} s: {stats}")
    size_mb = data.stat().st_size / 1e6

    baseline = [sys.executable, "-c", f"import json; json.load(open({str(data)!r}, 'rb'))"]
    exe = str(Path(sys.executable).with_name("eval-pipeline"))
    runs: dict[str, list[tuple[float, float]]] = {"json.load": [], "corpus": []}
    with tempfile.TemporaryDirectory(dir=data.parent) as tmp:
        for i in range(args.repeat):  # interleaved, so drift hits both alike
            runs["json.load"].append(measure(baseline))
            out = Path(tmp) / f"out{i}"
            runs["corpus"].append(
                measure([exe, "corpus", "--upstream", str(data), "--out", str(out)])
            )
    base_wall = min(w for w, _ in runs["json.load"])
    wall = min(w for w, _ in runs["corpus"])
    rss = max(r for _, r in runs["corpus"])
    ratio = wall / base_wall
    print(f"input: {data.name}, {size_mb:.0f} MB, {args.questions} questions")
    base_rss = max(r for _, r in runs["json.load"])
    print(f"json.load:            {base_wall:6.2f} s  peak RSS {base_rss:7.0f} MB")
    print(f"eval-pipeline corpus: {wall:6.2f} s  peak RSS {rss:7.0f} MB  (best of {args.repeat})")
    print(
        f"ratio corpus/json.load: {ratio:.2f} (target <= {TARGET_RATIO}) "
        f"{'OK' if ratio <= TARGET_RATIO else 'MISSED'}"
    )
    print(
        f"peak RSS: {rss:.0f} MB (target <= {TARGET_RSS_MB:.0f}) "
        f"{'OK' if rss <= TARGET_RSS_MB else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
