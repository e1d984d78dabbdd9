"""CPU-bound session reconcilers in worker processes (issue 29).

A sync reconciler that declares `cpu_bound = True` (`extractive`) is run by the runner in a
`ProcessPoolExecutor` of `processes` workers instead of threads: in threads the GIL keeps
extraction on one core. The driver keeps loading sessions and writing memory; the workers
only reconcile.

- The pool uses the `forkserver` start method (`spawn` where there is none), never `fork`:
  the driver holds threads, Bolt sockets and Dagster state that a forked child would inherit
  half-way. The fork server preloads this module and the reconciler's, so each worker starts
  from a process that has already paid the imports (and later pools of the same driver
  process start from the same server). Each worker takes the driver's environment and
  working directory as they are when the pool starts, not as they were when the server did.
- The reconciler is pickled once, in the driver (an unpicklable one is refused before any
  session is touched), and unpickled once per worker by the pool initializer.
- Sessions go in batches (`reconcile_batch`), to amortise pickling and IPC. Every session is
  reconciled and checked (`checked_memory`) by itself: an exception becomes that session's
  `RemoteSessionError` (type and message: the exception itself may not pickle), its
  batch-mates go on. `ReconcilerUnavailable` comes back as itself and stops the run.
- A worker process that dies (killed, out of memory) breaks the pool: `SessionPool.run`
  raises `ReconcileWorkerDied`, which stops the run. Sessions written before stay done, the
  rest stay pending: a re-run resumes. No session is silently left out.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import os
import pickle
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from eval_pipeline.reconcile.models import SessionInput, SessionMemory
from eval_pipeline.reconcile.protocol import ReconcileError, ReconcilerUnavailable

PROCESS_BATCH = 32  # sessions per task at most: ~0.6 s of extraction, one pickle each way
MAX_MESSAGE_CHARS = 2000  # of a failed session's message, before the runner's own bound

Outcome = SessionMemory | BaseException


class RemoteSessionError(Exception):
    """What a session's reconciler raised in a worker process: its type name and message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(type_name, message)
        self.type_name = type_name
        self.message = message

    def __str__(self) -> str:
        return self.message


class ReconcileWorkerDied(ReconcileError):
    """A reconciler worker process died: the run stops (infrastructure, not a session)."""


def checked_memory(result: Any, session: SessionInput) -> SessionMemory:
    """A reconciler's result for `session`, if it is valid memory for it (else raises)."""
    if not isinstance(result, SessionMemory):
        raise TypeError(f"reconcile() returned {type(result).__name__}, expected SessionMemory")
    result.check_against(session)
    return result


def is_cpu_bound(reconciler: Any) -> bool:
    """A sync `reconcile` that declares itself CPU-bound: worth worker processes."""
    return bool(getattr(reconciler, "cpu_bound", False)) and not inspect.iscoroutinefunction(
        getattr(reconciler, "reconcile", None)
    )


def resolve_processes(reconciler: Any, processes: int | None) -> int:
    """How many worker processes: 1 (in the driver, as threads) unless the reconciler is
    CPU-bound; then `processes`, unset: one per core."""
    if processes is not None and processes < 1:
        raise ValueError("processes must be at least 1")
    if not is_cpu_bound(reconciler):
        return 1
    return processes if processes is not None else (os.cpu_count() or 1)


# ---- in the worker process ----------------------------------------------------------------

_reconciler: Any = None
_init_s = 0.0


def _init(payload: bytes, environ: dict[str, str], cwd: str) -> None:
    global _reconciler, _init_s
    started = time.perf_counter()
    # The fork server's environment is the driver's when it started: make it the driver's now.
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    _reconciler = pickle.loads(payload)
    _init_s = time.perf_counter() - started


def _ready() -> tuple[int, float]:
    """This worker's pid and how long unpickling the reconciler took (its imports)."""
    return os.getpid(), _init_s


def reconcile_batch(sessions: list[SessionInput]) -> list[tuple[Outcome, float]]:
    """Each session's memory (or what went wrong with it) and the seconds it took."""
    out: list[tuple[Outcome, float]] = []
    for session in sessions:
        started = time.perf_counter()
        outcome: Outcome
        try:
            outcome = checked_memory(_reconciler.reconcile(session), session)
        except ReconcilerUnavailable as exc:
            outcome = ReconcilerUnavailable(str(exc))
        except Exception as exc:
            message = " ".join(str(exc).split())[:MAX_MESSAGE_CHARS]
            outcome = RemoteSessionError(type(exc).__name__, message)
        out.append((outcome, time.perf_counter() - started))
    return out


# ---- in the driver ------------------------------------------------------------------------


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


class SessionPool:
    """`processes` workers holding one unpickled copy of the reconciler each."""

    def __init__(self, reconciler: Any, processes: int) -> None:
        try:
            payload = pickle.dumps(reconciler)
        except Exception as exc:
            raise ReconcileError(
                f"reconciler {type(reconciler).__name__} declares cpu_bound but does not "
                f"pickle ({type(exc).__name__}: {exc}); set reconcile.processes to 1"
            ) from exc
        self._payload = payload
        self._module = type(reconciler).__module__
        self.processes = processes
        self.pids: list[int] = []
        self._executor: ProcessPoolExecutor | None = None

    async def start(self) -> dict[str, float]:
        """Start every worker (one `_ready` each; workers are started on demand) and wait
        for them: the seconds that took, and the slowest worker's reconciler unpickling."""
        started = time.perf_counter()
        context = _context()
        if context.get_start_method() == "forkserver":
            # Ignored once this process's fork server runs: it then has these already.
            context.set_forkserver_preload([__name__, self._module])
        self._executor = ProcessPoolExecutor(
            max_workers=self.processes,
            mp_context=context,
            initializer=_init,
            initargs=(self._payload, dict(os.environ), os.getcwd()),
        )
        loop = asyncio.get_running_loop()
        ready = await self._guard(
            asyncio.gather(
                *(loop.run_in_executor(self._executor, _ready) for _ in range(self.processes))
            ),
            "the workers were starting (each imports the main module: a script calling the "
            "runner at its top level needs `if __name__ == '__main__':`, or processes=1)",
        )
        self.pids = sorted({pid for pid, _ in ready})
        return {
            "worker_start_s": round(time.perf_counter() - started, 3),
            "worker_unpickle_s": round(max(s for _, s in ready), 3),
        }

    async def run(self, sessions: list[SessionInput]) -> list[tuple[Outcome, float]]:
        loop = asyncio.get_running_loop()
        first, last = sessions[0].session_id, sessions[-1].session_id
        return await self._guard(
            loop.run_in_executor(self._executor, reconcile_batch, sessions),
            f"batch {first!r}..{last!r} ({len(sessions)} sessions) was in flight",
        )

    async def _guard(self, awaitable: Any, doing: str) -> Any:
        try:
            return await awaitable
        except BrokenProcessPool as exc:
            gone = [pid for pid in self.pids if not _alive(pid)]
            who = f" (pid {', '.join(map(str, gone))} gone)" if gone else ""
            raise ReconcileWorkerDied(
                f"a reconciler worker process died{who} while {doing}: killed, or out of "
                "memory? The run stopped; sessions already written are done, the others "
                "stay pending (re-run to resume)"
            ) from exc

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (dead, not yet reaped by the fork server) still answers signal 0.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
