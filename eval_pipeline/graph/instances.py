"""Every embedded graph server the state dir knows: the default one, each question batch's
(`<data dir>-batchNN`, from `--batches K`) and any data directory a server was started on
elsewhere (`server.known_dir()` notes each one at its start).

What `graph status` lists and `graph stop` stops, and what `eval-pipeline run` reads at its end
to say which servers it started and which stay up. Plain Python: records and /proc only.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from eval_pipeline import processes
from eval_pipeline.graph import server


class Instance(BaseModel):
    """One embedded server's data directory and what its record says; `running` from /proc."""

    data_dir: str
    running: bool
    pid: int | None = None
    bolt_port: int | None = None
    http_port: int | None = None
    database: str | None = None
    rss: int | None = None  # bytes, while it runs
    started_by: str | None = None
    started_at: str | None = None
    owner: str | None = None

    def line(self) -> str:
        """`graph status`'s line for it."""
        if not self.running:
            return f"stopped   {self.data_dir}"
        return (
            f"running   pid {self.pid}, bolt {self.bolt_port}, http {self.http_port}, "
            f"database {self.database}, {processes.megabytes(self.rss)}, started "
            f"{self.started_at} by {self.started_by or 'unknown'}: {self.data_dir}"
        )


def batch_roots(root: Path) -> list[Path]:
    """The data directories of `root`'s question batches that exist (`<root>-batchNN`)."""
    return sorted(p for p in root.parent.glob(f"{root.name}-batch[0-9][0-9]*") if p.is_dir())


def known_roots() -> list[Path]:
    """The default data directory, every one noted at a server's start, and their batches'."""
    roots = [server.default_data_dir()]
    directory = server.known_dir()
    if directory.is_dir():
        for note in sorted(directory.glob("*.json")):
            record = processes.read_record(note) or {}
            if isinstance(record.get("data_dir"), str):
                roots.append(Path(record["data_dir"]))
    out: list[Path] = []
    for root in roots:
        for path in (root, *batch_roots(root)):
            if path not in out:
                out.append(path)
    return out


def instance(root: Path) -> Instance | None:
    """What `root`'s record says, None if no server was ever started there."""
    info = server.read_info(root)
    if info is None:
        return None
    alive = server.is_alive(info)
    return Instance(
        data_dir=str(root),
        running=alive,
        pid=info.pid,
        bolt_port=info.bolt_port,
        http_port=info.http_port,
        database=info.database,
        rss=processes.group_rss(info.pid) if alive else None,
        started_by=info.started_by,
        started_at=info.started_at,
        owner=info.owner,
    )


def known_instances() -> list[Instance]:
    return [i for root in known_roots() if (i := instance(root)) is not None]


def started_by_owner(owner: str) -> list[Instance]:
    """The running servers a command with token `owner` started (its batch workers' too)."""
    return [i for i in known_instances() if i.running and i.owner == owner]


def stop(instances: list[Instance]) -> list[Instance]:
    """Stop each running one; returns those stopped."""
    stopped = []
    for item in instances:
        if item.running and server.stop(item.data_dir):
            stopped.append(item)
    return stopped
