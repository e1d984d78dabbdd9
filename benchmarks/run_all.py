"""Every benchmark in one run (`make bench`), then each target's verdict side by side.

Each benchmark runs as its own process (a crash or a leaked server in one does not touch the
next), its output passed through as it comes; every line it prints that ends a target with
OK or MISSED is kept and printed again at the end, under the benchmark's name, with the load
average when the benchmark started and its wall time. A MISSED target is a measurement, not
an error: the exit status is non-zero only when a benchmark itself failed.

    .venv/bin/python -m benchmarks.run_all [--only bench_e2e,bench_scaleout]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field

# In the order `make bench` has always run them: cheap ones first, the long runs last.
BENCHMARKS = (
    "bench_corpus",
    "bench_inject",
    "bench_reconcile",
    "bench_retrieval",
    "bench_retrievers",
    "bench_llm_layer",
    "bench_e2e",
    "bench_scaleout",
    "bench_local_judge",
)
VERDICT = re.compile(r"\b(OK|MISSED)\b")


@dataclass
class Outcome:
    name: str
    load: float
    wall_s: float = 0.0
    exit_code: int | None = None
    targets: list[str] = field(default_factory=list)


def run(name: str) -> Outcome:
    outcome = Outcome(name, os.getloadavg()[0])
    print(f"\n######## {name} (load {outcome.load:.1f} on {os.cpu_count()} cores)", flush=True)
    started = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, "-u", "-m", f"benchmarks.{name}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            if VERDICT.search(line):
                outcome.targets.append(line.strip())
        outcome.exit_code = proc.wait()
    outcome.wall_s = time.perf_counter() - started
    return outcome


def summary(outcomes: list[Outcome]) -> str:
    lines = ["", "######## targets, side by side"]
    for o in outcomes:
        state = "ran" if o.exit_code == 0 else f"FAILED (exit {o.exit_code})"
        lines.append(f"{o.name}: {state}, {o.wall_s:.0f} s, load {o.load:.1f} at its start")
        lines.extend(f"    {t}" for t in o.targets or ["(prints no target)"])
    verdicts = [m.group(1) for o in outcomes for t in o.targets if (m := VERDICT.search(t))]
    lines.append(
        f"{verdicts.count('OK')} OK, {verdicts.count('MISSED')} MISSED; "
        f"load {os.getloadavg()[0]:.1f} at the end"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    args = parser.parse_args(argv)
    names = list(BENCHMARKS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(names) - set(BENCHMARKS))
        if unknown:
            parser.error(f"--only: unknown benchmark(s) {unknown}; known: {list(BENCHMARKS)}")
    outcomes = [run(name) for name in names]
    print(summary(outcomes), flush=True)
    return 0 if all(o.exit_code == 0 for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
