"""A value from the input file cannot forge cells, rows or headings in the UI's markdown tables
(issue 28, finding 9: a question_id with `|` or a newline did)."""

from __future__ import annotations

from eval_pipeline.assets.corpus import md_table
from eval_pipeline.assets.scoring import questions_markdown
from eval_pipeline.runs.markdown import md_cell

FORGED = "q1 | yes | forged\n## Heading\\| x"


def _cells(line: str) -> list[str]:
    """A markdown table row's cells, as a renderer splits them (an escaped pipe is text)."""
    inner = line.strip()[1:-1]
    cells, cur, i = [], "", 0
    while i < len(inner):
        if inner[i] == "\\" and i + 1 < len(inner):
            cur += inner[i : i + 2]
            i += 2
            continue
        if inner[i] == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += inner[i]
        i += 1
    return [*cells, cur.strip()]


def test_a_cell_is_one_line_with_its_pipes_and_backslashes_escaped():
    assert md_cell("a|b") == "a\\|b"
    assert md_cell("a\\|b") == "a\\\\\\|b"  # the backslash cannot un-escape the pipe
    assert "\n" not in md_cell(FORGED)


def test_the_questions_table_keeps_a_forged_id_in_its_own_cell():
    row = {
        "question_id": FORGED,
        "tier": 1,
        "question_type": "multi-session",
        "covered": False,
        "abstention": False,
        "weakest_link": "recall",
    }
    lines = questions_markdown([row]).splitlines()
    assert len(lines) == 3  # header, rule, one row: no forged row or heading
    assert not any(line.startswith("#") for line in lines)
    cells = _cells(lines[2])
    assert len(cells) == 6 and cells[3] == "no"


def test_every_metadata_table_escapes_its_cells():
    lines = md_table(["session_id", "reason"], [[FORGED, "x"]]).value.splitlines()
    assert len(lines) == 3 and len(_cells(lines[2])) == 2
