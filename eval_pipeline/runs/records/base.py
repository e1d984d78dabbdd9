"""What every record model shares: unknown fields refused when writing, kept when reading, and
a schema version per record kind.

One model serves both directions. Writing (`for_writing`) validates with the `WRITING`
context: every field typed, and a field the model does not know is an error, so a typo or a
new field nobody declared never reaches a bundle. Reading validates without it: a field this
code does not know (a newer bundle's) is kept, untyped, so newer bundles still load. The
published JSON Schemas describe the writer: no additional properties.

A record without `schema_version` is version 1: every bundle written before versioning has
version 1's fields or an older subset of them (fields added since have defaults). A version
newer than the model's `VERSION` is refused, not guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

WRITING = "eval_pipeline.records.writing"  # validation context key: strict, for a writer
LEGACY_VERSION = 1  # what a record without `schema_version` is read as
UNKNOWN_FIELD = "unknown_field"  # the error type of a field the model does not declare
_MAX_ERRORS = 5


class RecordError(ValueError):
    """A record that does not match its model; the message names the record and the field."""


class Part(BaseModel):
    """A typed part of a record (and the base of every record)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})

    @model_validator(mode="after")
    def _no_unknown_field_when_writing(self, info: ValidationInfo) -> Self:
        if self.model_extra and (info.context or {}).get(WRITING):
            raise PydanticCustomError(
                UNKNOWN_FIELD,
                "unknown field(s) {names}: not in the record's model",
                {"names": sorted(self.model_extra)},
            )
        return self


class Record(Part):
    """A top-level record: one JSON file, or one line of a JSONL file."""

    VERSION: ClassVar[int]
    FILE: ClassVar[str]  # where it is written, for error messages and the schema's title

    schema_version: int = Field(
        default=LEGACY_VERSION,
        description="This record's schema version; absent in records written before "
        "versioning, which read as version 1.",
    )

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int, info: ValidationInfo) -> int:
        if value < 1 or value > cls.VERSION:
            raise ValueError(
                f"schema_version {value} is not one this code reads (1..{cls.VERSION})"
            )
        if (info.context or {}).get(WRITING) and value != cls.VERSION:
            raise ValueError(f"a writer writes schema_version {cls.VERSION}, not {value}")
        return value


R = TypeVar("R", bound=Record)


def error_text(exc: ValidationError, limit: int = _MAX_ERRORS) -> str:
    """`field.path: message` per error (the first few), on one line."""
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        if err["type"] == UNKNOWN_FIELD:
            # Named where it is, like any other field.
            parts += [".".join([*loc, n]) + ": unknown field" for n in err["ctx"]["names"]]
        else:
            parts.append(
                f"{'.'.join(loc) or '(record)'}: {err['msg'].removeprefix('Value error, ')}"
            )
    more = len(parts) - limit
    return "; ".join(parts[:limit]) + (f"; … {more} more" if more > 0 else "")


def for_writing(model: type[Record], value: Record | Mapping[str, Any], where: str) -> dict:
    """`value` (a model, or the dict a writer built) checked as `model` writes it, as the JSON
    to write: the fields it was given (no defaults filled in, so the shape stays what the
    writer built) and this code's schema version. `where` names the record in an error."""
    if isinstance(value, BaseModel):
        raw = value.model_dump(mode="json", exclude_unset=True)
    elif isinstance(value, Mapping):
        raw = dict(value)
    else:
        raise RecordError(f"{where}: expected a {model.__name__} or a dict, got {type(value)}")
    raw.setdefault("schema_version", model.VERSION)
    try:
        record = model.model_validate(raw, context={WRITING: True})
    except ValidationError as exc:
        raise RecordError(f"{where}: {error_text(exc)}") from None
    return record.model_dump(mode="json", exclude_unset=True)


def for_reading(model: type[R], raw: Any, where: str) -> R:
    """`raw` (as read from a file) as `model`; unknown fields kept. RecordError on a mismatch."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise RecordError(f"{where}: {error_text(exc)}") from None
