"""Text placed in a markdown table cell (Dagster metadata, the report's summaries).

Values such as question ids come from the input file: a `|` would open a cell of its own and
a newline a row or a heading (`## ...`) the pipeline never wrote. A cell is one line, its
backslashes and pipes escaped (backslashes first: `\\|` must not become an escaped backslash
followed by a live pipe).
"""

from __future__ import annotations


def md_cell(value: object) -> str:
    """`value` as one markdown table cell: whitespace runs (newlines) as one space, `\\` and
    `|` escaped."""
    text = " ".join(str(value).split())
    return text.replace("\\", "\\\\").replace("|", "\\|")


def md_row(cells: list[object]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"
