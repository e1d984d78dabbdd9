"""The one writer of what the pipeline publishes: stage artifacts, run bundles, reports,
comparisons, noise floors, agreement files, corpus outputs.

Everything is staged beside its target (same file system, so publishing is a rename),
redacted there (`llm.credentials.redact_file`: every known secret, in every form an echo may
give it), made private, and only then renamed into place. So a reader never sees half an
output, and no output skips redaction: issue 28's probe found `report.html` written by a
writer of its own that never redacted (`--label "$OPENAI_API_KEY"` put the key in it three
times). A new output goes through here, not through a writer of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from eval_pipeline.llm.credentials import PRIVATE_FILE, redact_file, redact_tree


def write_text(path: str | Path, text: str) -> int:
    """Write `text` to `path` atomically, redacted and private; the number of redactions."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The staged name keeps the target's suffix: redaction reads JSON and JSONL as such.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        hits = redact_file(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return hits


def publish_dir(
    stage: Path, final: Path, *, replace: bool = False, marker: str | None = None
) -> int:
    """Redact everything under `stage`, then rename it to `final`; the number of redactions.
    `replace`: an existing `final` is removed first (else the rename refuses a non-empty one).
    `marker`: when something was redacted, a file of that name in `final` says how much (a
    reader must know something was removed)."""
    hits = redact_tree(stage)
    if hits and marker:
        note = stage / marker
        note.write_text(f'{{"redactions": {hits}}}\n', encoding="utf-8")
        os.chmod(note, PRIVATE_FILE)
    if replace and final.exists():
        shutil.rmtree(final)
    os.rename(stage, final)
    return hits


@contextlib.contextmanager
def staged_files(out_dir: Path, names: Iterable[str]) -> Iterator[Path]:
    """Yield a private staging directory; on success redact `names` and move them into
    `out_dir`, in order (list the file whose presence means "complete" last).

    On any error nothing new is left in `out_dir` (it is removed again if we created it).
    """
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.staging-", dir=out_dir.parent))
    try:
        yield stage
        names = list(names)
        for name in names:
            redact_file(stage / name)
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            os.replace(stage / name, out_dir / name)
    except BaseException:
        if created and out_dir.exists() and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
