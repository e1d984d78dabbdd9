"""Scale-out benchmark: one LongMemEval_M-shaped input, run over K = 1 and K = 2 question
batches (each batch on an embedded graph server of its own), side by side in one run.

M has about 500 sessions per question; this machine cannot hold all 500 questions, so the
input is M-shaped but trimmed to `--questions` (default 16). For each K, one
`eval-pipeline run --upstream <file> --batches K` in its own process and state directory;
printed: wall time and speed-up, the peak RSS of the pipeline's processes (the driver and each
batch worker) and of each batch's graph server, each batch's stage times, and what K = 16 on
full M would need, projected from the measured per-batch figures.

    .venv/bin/python -m benchmarks.bench_scaleout [--questions 16] [--sessions 500]
        [--batches 1,2] [--seed 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_e2e import TARGET_WHOLE_S, peak_rss_mb
from eval_pipeline.corpus.generate import UPSTREAM_QUESTIONS, generate
from eval_pipeline.settings import state_dir

M_SESSIONS_PER_QUESTION = 500
S_SESSIONS_PER_QUESTION = 47  # generate()'s default, the S shape
PROJECT_K = 16


def m_file(questions: int, sessions: int, seed: int) -> Path:
    path = state_dir() / "bench" / f"longmemeval_m_generated_q{questions}_p{sessions}_s{seed}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        stats = generate(path, questions=questions, sessions_per_question=sessions, seed=seed)
        print(f"generated {path.name} in {time.perf_counter() - started:.0f} s: {stats}")
    return path


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TreeSampler:
    """Peak RSS and CPU time per process of a child's tree: the driver, its batch workers and
    the graph servers it starts (they outlive the run, so their peak is read again after)."""

    def __init__(self, pid: int, every_s: float = 0.5) -> None:
        self.pid, self.every_s = pid, every_s
        self.peaks: dict[int, float] = {}
        self.cpu: dict[int, float] = {}
        self.java: set[int] = set()  # the graph servers among them
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            todo, seen = [self.pid], set()
            while todo:
                pid = todo.pop()
                if pid in seen:
                    continue
                seen.add(pid)
                self.peaks[pid] = max(self.peaks.get(pid, 0.0), _rss_mb(pid))
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), _cpu_s(pid))
                if pid not in self._seen:
                    self._seen.add(pid)
                    try:
                        if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                            self.java.add(pid)
                    except OSError:
                        pass
                todo.extend(_children(pid))

    def stop(self) -> dict[int, float]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peaks


def server_peaks(home: Path) -> dict[str, float | None]:
    """Each embedded server's peak RSS (VmHWM), by data directory name."""
    out: dict[str, float | None] = {}
    for info in sorted((home / "graph").glob("arcadedb*/eval_pipeline_server.json")):
        pid = json.loads(info.read_text()).get("pid")
        out[info.parent.name] = peak_rss_mb(pid) if pid else None
    return out


def run_k(exe: str, data: Path, k: int, root: Path) -> dict[str, Any]:
    home = root / f"k{k}"
    env = {
        **{n: v for n, v in os.environ.items() if n != "CONFIDENT_API_KEY"},
        "EVAL_PIPELINE_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
    }
    subprocess.run([exe, "graph", "stop", "--all"], env=env, capture_output=True)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    cmd = [exe, "run", "--upstream", str(data), "--batches", str(k), "--label", f"k{k}"]
    started = time.perf_counter()
    with open(home / "run.stdout", "w") as out, open(home / "run.stderr", "w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        sampler = TreeSampler(proc.pid)
        code = proc.wait()
        peaks = sampler.stop()
    wall = time.perf_counter() - started
    if code not in (0, 4):
        tail = (home / "run.stderr").read_text()[-3000:]
        raise SystemExit(f"K={k}: eval-pipeline run exited {code}:\n{tail}")
    run_dir = Path((home / "run.stdout").read_text().strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    servers = server_peaks(home)
    subprocess.run([exe, "graph", "stop", "--all"], env=env, capture_output=True)
    driver = peaks.pop(proc.pid, 0.0)
    cpu_s = sum(sampler.cpu.values())
    return {
        "k": k,
        "exit": code,
        "wall_s": round(wall, 1),
        # CPU seconds of the whole tree over wall seconds: how many cores the run kept busy.
        "cpu_s": round(cpu_s, 1),
        "cores_busy": round(cpu_s / wall, 2),
        "driver_peak_rss_mb": round(driver, 1),
        # The batch workers (and, K = 1, nothing: the driver runs the stages itself).
        "worker_peak_rss_mb": sorted(
            round(v, 1) for pid, v in peaks.items() if v > 50 and pid not in sampler.java
        ),
        "server_peak_rss_mb": servers,
        "batches": manifest.get("batches") or [],
        "stages": {n: v.get("seconds") for n, v in (manifest.get("stages") or {}).items()},
    }


def project(result: dict[str, Any], questions: int, sessions: int) -> dict[str, Any]:
    """K = 16 on full M, from one measured batch: its work scales with its sessions (inject,
    reconcile) and its questions (retrieval); memory with the sessions an instance holds."""
    batches = result["batches"]
    if not batches:
        return {}
    sessions_per_batch = sum(b["sessions"] or 0 for b in batches) / len(batches)
    questions_per_batch = sum(b["questions"] or 0 for b in batches) / len(batches)
    secs = [b["seconds"] for b in batches]
    per_session = sum(
        (s["injected_graph"] or 0) + (s["reconciled_graph"] or 0) for s in secs
    ) / max(1.0, sum(b["sessions"] or 0 for b in batches))
    per_question = sum(s["retrieval_results"] or 0 for s in secs) / max(
        1.0, sum(b["questions"] or 0 for b in batches)
    )
    full_questions = UPSTREAM_QUESTIONS
    # Measured ratio of distinct sessions to haystack slots in the trimmed input.
    ratio = sessions_per_batch * len(batches) / max(1.0, questions * sessions)
    m_sessions_per_batch = full_questions * sessions * ratio / PROJECT_K
    m_questions_per_batch = full_questions / PROJECT_K
    server_mb = [v for v in result["server_peak_rss_mb"].values() if v]
    per_instance = max(server_mb) if server_mb else None
    return {
        "instances": PROJECT_K,
        "sessions_per_instance": round(m_sessions_per_batch),
        "questions_per_instance": round(m_questions_per_batch, 1),
        "batch_wall_s": round(
            m_sessions_per_batch * per_session + m_questions_per_batch * per_question, 0
        ),
        "server_rss_mb_per_instance": round(
            per_instance * m_sessions_per_batch / max(1.0, sessions_per_batch), 0
        )
        if per_instance
        else None,
        "measured_from": {
            "sessions_per_batch": round(sessions_per_batch),
            "questions_per_batch": round(questions_per_batch, 1),
            "s_per_session_inject_reconcile": round(per_session, 4),
            "s_per_question_retrieval": round(per_question, 3),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=M_SESSIONS_PER_QUESTION)
    parser.add_argument(
        "--shape",
        choices=("m", "s"),
        default="m",
        help="m: --sessions per question (default); s: the S-shaped file bench_e2e uses",
    )
    parser.add_argument("--batches", default="1,2", help="the Ks to run, side by side")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    ks = [int(k) for k in args.batches.split(",")]
    if args.shape == "s":
        from benchmarks.bench_reconcile import corpus_file  # the cached S-shaped file

        data, args.sessions = corpus_file(args.questions, args.seed), S_SESSIONS_PER_QUESTION
    else:
        data = m_file(args.questions, args.sessions, args.seed)
    exe = str(Path(sys.executable).with_name("eval-pipeline"))
    root = state_dir() / "bench" / f"scaleout-{args.shape}"
    print(f"input {data.name}: {args.questions} questions x {args.sessions} sessions", flush=True)
    results = []
    for k in ks:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"K={k}: running (load {load} on {os.cpu_count()} cores) ...", flush=True)
        results.append(run_k(exe, data, k, root))
        r = results[-1]
        print(
            f"K={k}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.0f} s ({r['cores_busy']:.2f} "
            f"of {os.cpu_count()} cores busy), driver peak {r['driver_peak_rss_mb']:.0f} MB, "
            f"workers {r['worker_peak_rss_mb']} MB, servers {r['server_peak_rss_mb']} MB",
            flush=True,
        )
        for b in r["batches"]:
            secs = ", ".join(f"{n} {v:.1f} s" for n, v in b["seconds"].items() if v is not None)
            print(f"    {b['batch']}: {b['questions']} questions, {b['sessions']} sessions: {secs}")
    base = results[0]
    for r in results[1:]:
        print(
            f"speed-up K={r['k']} vs K={base['k']}: {base['wall_s'] / r['wall_s']:.2f}x "
            f"({base['wall_s']:.1f} s -> {r['wall_s']:.1f} s)"
        )
    if args.shape == "s" and args.questions == UPSTREAM_QUESTIONS:
        for r in results:  # issue 18's whole-run target, for each K measured
            verdict = "OK" if r["wall_s"] <= TARGET_WHOLE_S else "MISSED"
            print(
                f"target: whole S run with K={r['k']} {r['wall_s'] / 60:.2f} min <= "
                f"{TARGET_WHOLE_S / 60:.0f} min {verdict}"
            )
    projection = project(results[-1], args.questions, args.sessions)
    if projection and args.shape == "m":
        print(
            f"K={PROJECT_K} on full M (projected from K={results[-1]['k']}'s batches): "
            f"{projection['instances']} instances, ~{projection['sessions_per_instance']} "
            f"sessions and {projection['questions_per_instance']} questions each, batch wall "
            f"~{projection['batch_wall_s']:.0f} s, server RSS ~"
            f"{projection['server_rss_mb_per_instance']} MB per instance "
            f"(from {projection['measured_from']})"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "k16": projection}, indent=2))


if __name__ == "__main__":
    main()
