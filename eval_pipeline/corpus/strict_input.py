"""Strict readers for the input files a user hands us: JSON (upstream records, JSONL lines,
label files) and YAML/JSON configs. One place decides what is refused, each with one line:

- nesting deeper than `limits.MAX_JSON_DEPTH` (Python's decoders recurse: RecursionError
  past ~1,000 levels, and a YAML composer the same);
- `NaN`, `Infinity`, and numbers that overflow to infinity (`1e400`): not JSON values, and
  an answer of "nan" or "inf" is not an answer;
- lone surrogates (`"\\ud800"` decodes to a `str` that cannot be written as UTF-8: it would
  fail later, at a write, naming no record);
- in YAML: aliases (a 456-byte alias bomb expands to gigabytes), a key given twice, and
  non-finite floats (`.nan`, `.inf`).

The errors are `StrictInputError`s, a ValueError whose message names what was refused; the
caller adds the file, line or record.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

from eval_pipeline.corpus.limits import MAX_JSON_DEPTH

_SURROGATE = re.compile("[\ud800-\udfff]")


class StrictInputError(ValueError):
    """Input refused by a strict reader; the message says what and where inside the value."""


def _refuse_constant(name: str) -> Any:
    raise StrictInputError(f"{name} is not a JSON value (NaN and Infinity are refused)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictInputError(f"the number {text} overflows to infinity")
    return value


DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_float)


def text_problem(value: str) -> str | None:
    """Why a string cannot be text (a lone surrogate), or None."""
    found = _SURROGATE.search(value)
    if found is None:
        return None
    return f"holds a lone surrogate (U+{ord(found.group()):04X} at character {found.start()})"


def check_value(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse a decoded value nested deeper than `max_depth`, holding a non-finite float or a
    string (or key) with a lone surrogate; the error names the path inside the value."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > max_depth:
                raise StrictInputError(f"nested deeper than {max_depth} levels at {path or '$'}")
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, child in items:
                if isinstance(key, str) and (problem := text_problem(key)):
                    raise StrictInputError(f"a key at {path or '$'} {problem}")
                step = f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
                stack.append((child, step.lstrip("."), depth + 1))
        elif isinstance(node, str):
            problem = text_problem(node)
            if problem:
                raise StrictInputError(f"{path or 'the value'} {problem}")
        elif isinstance(node, float) and not math.isfinite(node):
            raise StrictInputError(f"{path or 'the value'} is {node} (not a finite number)")


def raw_decode(text: str, pos: int) -> tuple[Any, int]:
    """`json.JSONDecoder.raw_decode` with the refusals above (depth checked after decoding,
    a RecursionError turned into the same refusal)."""
    try:
        value, end = DECODER.raw_decode(text, pos)
    except RecursionError:
        raise StrictInputError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    check_value(value)
    return value, end


def loads(text: str) -> Any:
    """One JSON document (a JSONL line), strictly: json.JSONDecodeError for bad syntax,
    StrictInputError for what is refused."""
    value, end = raw_decode(text, _skip_ws(text, 0))
    if _skip_ws(text, end) != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


# --- YAML -----------------------------------------------------------------------------------


class StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases, keys given twice and nesting past MAX_JSON_DEPTH (PyYAML
    expands aliases, keeps the last of two equal keys silently, and recurses per level)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are refused in this file", event.start_mark
            )
        self._depth += 1
        try:
            if self._depth > MAX_JSON_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_JSON_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _mapping(loader: StrictYamlLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


StrictYamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_yaml(text: str) -> Any:
    """A YAML (or JSON) document, strictly: yaml.YAMLError for bad syntax and for aliases,
    repeated keys and deep nesting; StrictInputError for non-finite floats and lone
    surrogates."""
    try:
        value = yaml.load(text, Loader=StrictYamlLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:  # a flow collection nests inside the scanner, before compose_node
        raise StrictInputError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    check_value(value)
    return value


def yaml_error_text(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: its problem and where."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return " ".join(f"{problem}{where}".split())
