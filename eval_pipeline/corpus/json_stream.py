"""Stream the records of a top-level JSON array one at a time.

The upstream files are one JSON array (the M variant is 2.7 GB), so `json.load` would hold
everything at once. We read fixed-size chunks and let the C decoder (`raw_decode`) parse
each element; a decode that fails only because the chunk ended is retried with more data.
Peak memory is then about one chunk plus the largest record, whatever the file size.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from eval_pipeline.corpus import strict_input
from eval_pipeline.corpus.errors import CorpusError

CHUNK_BYTES = 8 * 1024 * 1024
_WS = " \t\n\r"


class _Reader:
    def __init__(self, fh: IO[bytes], chunk_bytes: int, on_bytes) -> None:
        self._fh = fh
        self._chunk = chunk_bytes
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._on_bytes = on_bytes
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Append the next chunk to the buffer (dropping what was consumed)."""
        if self.eof:
            return False
        raw = self._fh.read(self._chunk)
        if self._on_bytes is not None and raw:
            self._on_bytes(raw)
        try:
            text = self._utf8.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise CorpusError(f"file is not valid UTF-8 ({exc.reason})") from None
        if not raw:
            self.eof = True
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return True

    def skip_ws(self) -> str | None:
        """Return the next non-blank character (not consumed), or None at end of file."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < n:
                return self.buf[self.pos]
            if not self.more():
                return None


def _looks_truncated(exc: json.JSONDecodeError, buf_len: int) -> bool:
    # A decode error caused by the chunk boundary is either an unterminated string or an
    # error reported at (or a few characters before, for escapes) the end of the buffer.
    return exc.msg.startswith("Unterminated string") or exc.pos >= buf_len - 8


def iter_json_array(
    path: str | Path, *, chunk_bytes: int = CHUNK_BYTES, on_bytes=None
) -> Iterator[tuple[int, Any]]:
    """Yield `(index, element)` for each element of the JSON array in `path`.

    `on_bytes`, if given, is called with every raw chunk read (used to hash the file in the
    same pass). Errors are `CorpusError`s naming the element index.
    """
    with open(path, "rb") as fh:
        r = _Reader(fh, chunk_bytes, on_bytes)
        first = r.skip_ws()
        if first is None:
            raise CorpusError("file is empty; expected a JSON array of records")
        if first == "\ufeff":
            r.pos += 1
            first = r.skip_ws()
        if first != "[":
            raise CorpusError("not a JSON array: the upstream file must start with '['")
        r.pos += 1
        index = 0
        while True:
            c = r.skip_ws()
            if c is None:
                raise CorpusError("JSON array is not closed (file truncated?)", record=index)
            if c == "]" and index == 0:
                r.pos += 1
                break
            while True:
                try:
                    # Strict: no NaN/Infinity, no lone surrogate, bounded nesting.
                    value, end = strict_input.raw_decode(r.buf, r.pos)
                    # A number or literal cut by the chunk boundary decodes "successfully".
                    if end >= len(r.buf) and not r.eof:
                        raise json.JSONDecodeError("value reaches end of buffer", r.buf, end)
                    break
                except json.JSONDecodeError as exc:
                    if not r.eof and _looks_truncated(exc, len(r.buf)):
                        r.more()
                        continue
                    raise CorpusError(
                        f"invalid JSON: {exc.msg} (at character {exc.pos - r.pos} of the record)",
                        record=index,
                    ) from None
                except strict_input.StrictInputError as exc:
                    # Never the chunk's cut: a cut number only loses digits, a cut NaN,
                    # Infinity or surrogate pair is a syntax error retried above.
                    raise CorpusError(str(exc), record=index) from None
            r.pos = end
            yield index, value
            index += 1
            c = r.skip_ws()
            if c == ",":
                r.pos += 1
                continue
            if c == "]":
                r.pos += 1
                break
            found = "end of file" if c is None else repr(c)
            raise CorpusError(
                f"invalid JSON: expected ',' or ']' after the record, found {found}",
                record=index - 1,
            )
        if r.skip_ws() is not None:
            raise CorpusError("invalid JSON: data after the closing ']' of the array")
