"""The one error type of the corpus stage: it always names the record and the field."""

from __future__ import annotations


class CorpusError(ValueError):
    """Bad upstream input. `record` is a question_id when known, else the 0-based index."""

    def __init__(self, message: str, *, record: str | int | None = None, field: str | None = None):
        self.record = record
        self.field = field
        self.detail = message
        where = []
        if record is not None:
            where.append(f"record {record!r}" if isinstance(record, str) else f"record #{record}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
