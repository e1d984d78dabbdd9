"""Scale-out benchmark: one LongMemEval_M-shaped input, run over K = 1 and K = 2 question
batches (each batch on an embedded graph server of its own), side by side in one run.

M has about 500 sessions per question; this machine cannot hold all 500 questions, so the
input is M-shaped but trimmed to `--questions` (default 16). For each K, one
`eval-pipeline run --upstream <file> --batches K` in its own process and state directory;
printed: wall time and speed-up, the peak RSS of the pipeline's processes (the driver and each
batch worker) and of each batch's graph server, each batch's stage times, what K = 16 on
full M would need, projected from the measured per-batch figures, and where the rest goes: the
speed-up against the 1.4x target (OK / MISSED), the serial driver time before and after the
batches, each batch's fixed start-up, the batches' overlap, the CPU bound (cores over K = 1's
busy cores, capped by K) and the load average during each run.

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
        self.loads: list[float] = []  # the 1-minute load average, each sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.loads.append(os.getloadavg()[0])
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


GRAPH_STAGES = ("injected_graph", "reconciled_graph", "retrieval_results")


def timeline(home: Path, began: float, ended: float) -> dict[str, Any]:
    """Where one run's wall time went, from its Dagster instance's run records (each stage is
    a run: created, started, ended): the serial driver time until the corpus stages end and
    after the last batch stage, each batch's window and its fixed start-up (from the corpus
    stages' end to its first stage's start, and each stage run's launch), and how much
    of the batch phase the batches ran at the same time. Seconds, from the process's start."""
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home / "dagster_home"))
    try:
        records = instance.get_run_records()
    finally:
        instance.dispose()
    stage_runs = []
    for r in records:
        stage = r.dagster_run.tags.get("eval_pipeline/stage")
        if stage and r.start_time and r.end_time:
            created = r.create_timestamp.timestamp()
            part = r.dagster_run.tags.get("dagster/partition") if stage in GRAPH_STAGES else None
            stage_runs.append(
                (created - began, r.start_time - began, r.end_time - began, stage, part)
            )
    stage_runs.sort()
    batch_runs: dict[str, list[tuple]] = {}
    for run in stage_runs:
        if run[4]:
            batch_runs.setdefault(run[4], []).append(run)
    if not batch_runs:
        return {}
    windows = {b: (min(x[0] for x in rs), max(x[2] for x in rs)) for b, rs in batch_runs.items()}
    first, last = min(w[0] for w in windows.values()), max(w[1] for w in windows.values())
    corpus_end = max((x[2] for x in stage_runs if x[0] < first and not x[4]), default=0.0)
    both = max(0.0, min(w[1] for w in windows.values()) - max(w[0] for w in windows.values()))
    lengths = [w[1] - w[0] for w in windows.values()]
    batches = {}
    for b, rs in sorted(batch_runs.items()):
        # A stage run's launch: created → started, and the gap since the batch's previous run.
        launch = sum(x[1] - x[0] for x in rs) + sum(
            nxt[0] - prev[2] for prev, nxt in zip(rs, rs[1:], strict=False)
        )
        batches[b] = {
            "window_s": [round(windows[b][0], 1), round(windows[b][1], 1)],
            "startup_s": round(rs[0][1] - corpus_end, 1),  # worker start, first run's launch
            "stage_launch_s": round(launch, 1),
        }
    return {
        # CLI start, preflight, the corpus stages (and what of the servers' start they hide).
        "serial_before_s": round(corpus_end, 1),
        # From the corpus stages' end to the last batch's end: with each batch's start-up.
        "batch_phase_s": round(last - corpus_end, 1),
        "serial_after_s": round(ended - began - last, 1),
        # Share of the batch phase during which every batch was running.
        "overlap": round(both / max(1e-9, last - first), 2),
        "first_batch_stage_s": round(first, 1),
        "longest_over_mean_batch": round(max(lengths) / (sum(lengths) / len(lengths)), 2),
        "batches": batches,
    }


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
    started, began = time.perf_counter(), time.time()
    with open(home / "run.stdout", "w") as out, open(home / "run.stderr", "w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        sampler = TreeSampler(proc.pid)
        code = proc.wait()
        peaks = sampler.stop()
    wall, ended = time.perf_counter() - started, time.time()
    if code not in (0, 4):
        tail = (home / "run.stderr").read_text()[-3000:]
        raise SystemExit(f"K={k}: eval-pipeline run exited {code}:\n{tail}")
    run_dir = Path((home / "run.stdout").read_text().strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    servers = server_peaks(home)
    subprocess.run([exe, "graph", "stop", "--all"], env=env, capture_output=True)
    driver = peaks.pop(proc.pid, 0.0)
    cpu_s = sum(sampler.cpu.values())
    cpu_servers = sum(v for pid, v in sampler.cpu.items() if pid in sampler.java)
    cpu_driver = sampler.cpu.get(proc.pid, 0.0)
    return {
        "k": k,
        "exit": code,
        "wall_s": round(wall, 1),
        # CPU seconds of the whole tree over wall seconds: how many cores the run kept busy.
        "cpu_s": round(cpu_s, 1),
        "cores_busy": round(cpu_s / wall, 2),
        # Whose CPU: the graph servers (JVMs), the driver, the rest (batch workers, helpers).
        "cpu_by_kind_s": {
            "servers": round(cpu_servers, 1),
            "driver": round(cpu_driver, 1),
            "workers": round(cpu_s - cpu_servers - cpu_driver, 1),
        },
        "driver_peak_rss_mb": round(driver, 1),
        # The batch workers (and, K = 1, nothing: the driver runs the stages itself).
        "worker_peak_rss_mb": sorted(
            round(v, 1) for pid, v in peaks.items() if v > 50 and pid not in sampler.java
        ),
        "server_peak_rss_mb": servers,
        "batches": manifest.get("batches") or [],
        "stages": {n: v.get("seconds") for n, v in (manifest.get("stages") or {}).items()},
        "load_avg": round(sum(sampler.loads) / max(1, len(sampler.loads)), 2),
        "timeline": timeline(home, began, ended),
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


TARGET_SPEEDUP = 1.4  # issue 29: K = 2 at least 1.4x K = 1 on the M-shaped input


def where_the_rest_goes(results: list[dict[str, Any]]) -> list[str]:
    """Side by side: each K's wall, the speed-up against the target, and what keeps K batches
    from being K times faster: serial driver time, each batch's fixed start-up, how much the
    batches overlapped, and the CPU bound (K = 1's busy cores on this machine's cores)."""
    one = next((r for r in results if r["k"] == 1), None)
    if one is None or len(results) < 2:
        return []
    cores = os.cpu_count() or 1
    lines = ["", "K    wall s  before s  batches s  after s  overlap  longest/mean  load"]
    for r in results:
        t = r["timeline"]
        lines.append(
            f"{r['k']:<4} {r['wall_s']:6.1f}  {t.get('serial_before_s', 0):8.1f}  "
            f"{t.get('batch_phase_s', 0):9.1f}  {t.get('serial_after_s', 0):7.1f}  "
            f"{t.get('overlap', 1):7.0%}  {t.get('longest_over_mean_batch', 1):12.2f}  "
            f"{r['load_avg']:4.1f}"
        )
    for r in results:
        if r is one:
            continue
        speedup = one["wall_s"] / r["wall_s"]
        verdict = "OK" if r["k"] != 2 or speedup >= TARGET_SPEEDUP else "MISSED"
        # What K batches could reach on this many cores when K = 1 already keeps
        # cores_busy of them busy (the batches' work is CPU: Python beside each JVM).
        bound = min(float(r["k"]), cores / max(one["cores_busy"], 1e-9))
        t, t1 = r["timeline"], one["timeline"]
        serial, serial1 = (
            t.get("serial_before_s", 0) + t.get("serial_after_s", 0),
            t1.get("serial_before_s", 0) + t1.get("serial_after_s", 0),
        )
        # The wall K would have if only its batch phase changed: K = 1's phase / bound.
        ideal = serial1 + t1.get("batch_phase_s", 0) / bound
        lines += [
            f"K={r['k']} vs K=1: wall {one['wall_s']:.1f} s -> {r['wall_s']:.1f} s, speed-up "
            f"{speedup:.2f}x (target {TARGET_SPEEDUP:.1f}x: {verdict}); load average "
            f"{one['load_avg']:.1f} / {r['load_avg']:.1f} on {cores} cores",
            f"  serial driver time (CLI start, preflight, corpus stages, scoring, exit): "
            f"{serial1:.1f} s at K=1, {serial:.1f} s at K={r['k']} (until the corpus stages end "
            f"{t.get('serial_before_s', 0):.1f} s, after the last batch "
            f"{t.get('serial_after_s', 0):.1f} s)",
        ]
        for b, v in t.get("batches", {}).items():
            lines.append(
                f"  {b}: {v['window_s'][0]:.1f}-{v['window_s'][1]:.1f} s, fixed start-up "
                f"{v['startup_s']:.1f} s (corpus end -> first stage started), stage-run "
                f"launches {v['stage_launch_s']:.1f} s"
            )
        phase, phase1 = t.get("batch_phase_s", 0), t1.get("batch_phase_s", 0)
        kinds, kinds1 = r.get("cpu_by_kind_s") or {}, one.get("cpu_by_kind_s") or {}
        lines += [
            # wall = CPU seconds / cores busy, so the speed-up is the product of these two.
            f"  CPU: speed-up = (CPU work K=1 / K={r['k']}) x (cores busy K={r['k']} / K=1) = "
            f"({one['cpu_s']:.0f} / {r['cpu_s']:.0f} s) x ({r['cores_busy']:.2f} / "
            f"{one['cores_busy']:.2f}) = {one['cpu_s'] / max(1e-9, r['cpu_s']):.2f} x "
            f"{r['cores_busy'] / max(1e-9, one['cores_busy']):.2f}; CPU s of servers / driver "
            f"/ workers: K=1 {kinds1.get('servers', 0):.0f} / {kinds1.get('driver', 0):.0f} / "
            f"{kinds1.get('workers', 0):.0f}, K={r['k']} {kinds.get('servers', 0):.0f} / "
            f"{kinds.get('driver', 0):.0f} / {kinds.get('workers', 0):.0f}",
            f"  batch phase (corpus end -> last batch's end) {phase1:.1f} s -> {phase:.1f} s "
            f"({phase1 / max(1e-9, phase):.2f}x); "
            f"all batches running at once {t.get('overlap', 0):.0%} of it; longest batch "
            f"{t.get('longest_over_mean_batch', 1):.2f}x the mean",
            f"  CPU bound: cores_busy {one['cores_busy']:.2f} at K=1 -> best possible K={r['k']} "
            f"speed-up of the batch phase min({r['k']}, {cores}/{one['cores_busy']:.2f}) = "
            f"{bound:.2f}x; with K=1's serial time that is a wall of {ideal:.1f} s "
            f"({one['wall_s'] / ideal:.2f}x); cores_busy at K={r['k']} {r['cores_busy']:.2f}",
        ]
    return lines


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
    for line in where_the_rest_goes(results):
        print(line)
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
