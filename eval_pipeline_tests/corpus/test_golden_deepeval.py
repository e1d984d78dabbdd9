"""Our goldens are deepeval's own `Golden`, and why our own JSONL writer writes them.

Every row we write (the committed corpus/sample/goldens.jsonl, and goldens the converter
builds from the bundled sample, from a generated LongMemEval_S-shaped file and from records
with awkward context text) validates as `deepeval.dataset.Golden` and dumps back to the same
values for every field we write. deepeval's own `save_as` (a local file write, checked here
with the network refused) joins `context` with `|`, which loses the boundaries between
evidence turns and splits turns containing `|` when read back.

deepeval is imported after `harden_deepeval_env()` (see eval_pipeline_tests/conftest.py,
which imports it once, hardened, for the whole session).
"""

from __future__ import annotations

import csv
import json
import os
import socket
from pathlib import Path

import pytest

from eval_pipeline.corpus.convert import GOLDENS_FILE, build_corpus
from eval_pipeline.corpus.generate import generate
from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.corpus.models import Golden as OurGolden
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.upstream import UpstreamSpec, resolve_upstream
from eval_pipeline.llm import harden_deepeval_env
from eval_pipeline.llm.deepeval_env import DEEPEVAL_HARDENING, ensure_no_confident_upload
from eval_pipeline_tests.corpus.records import record, session, write_upstream

harden_deepeval_env()  # no-op after conftest; keeps this module safe to run on its own

from deepeval.dataset import EvaluationDataset, Golden  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
COMMITTED_GOLDENS = REPO / "corpus" / "sample" / GOLDENS_FILE
OUR_FIELDS = ("input", "expected_output", "context", "name", "source_file", "additional_metadata")
SMALL = {"sessions_per_question": 12, "turns_per_session": 4, "turn_bytes": 120}

# Evidence turns a `|`-joining format cannot keep apart, plus non-ASCII of several scripts.
AWKWARD_TURNS = [
    "cat *.csv | wc -l",
    "|leading and trailing|",
    "a || b ||| c",
    "Brühwerk, Lindenstraße 5 — Zürich",
    "ごちそうさまでした | 乾杯 🍻",
    'line one\nline two\ttabbed "quoted" \\ backslash',
    "",
]


def _build(upstream: Path | None, out: Path) -> list[dict]:
    spec = UpstreamSpec() if upstream is None else UpstreamSpec(source="path", path=str(upstream))
    build_corpus(resolve_upstream(spec, verify=upstream is None), out, SampleSpec())
    return list(read_jsonl(out / GOLDENS_FILE))


def _awkward_records() -> list[dict]:
    evidence = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text, "has_answer": True}
        for i, text in enumerate(AWKWARD_TURNS)
    ]
    return [
        record(
            "aaaa0001",
            sessions=[("answer_aaaa0001_1", evidence), ("shared_d", session("d"))],
            answer="a | b",
        ),
        record(
            "aaaa0002",
            "multi-session",
            sessions=[
                ("answer_aaaa0002_1", [{**evidence[0]}, {**evidence[1], "has_answer": False}]),
                ("answer_aaaa0002_2", [{**evidence[4]}]),
                ("shared_d", session("d")),
            ],
            answer=42,
            answer_ids=["answer_aaaa0002_1", "answer_aaaa0002_2"],
        ),
    ]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """Golden rows as the project writes them, by origin."""
    root = tmp_path_factory.mktemp("goldens")
    generated = root / "generated.json"
    generate(generated, questions=60, seed=7, **SMALL)
    awkward = write_upstream(root / "awkward.json", _awkward_records())
    return {
        "committed sample": list(read_jsonl(COMMITTED_GOLDENS)),
        "converted bundled sample": _build(None, root / "sample"),
        "converted generated file": _build(generated, root / "generated"),
        "converted awkward records": _build(awkward, root / "awkward"),
    }


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch):
    """Refuse every outgoing connection, and any Confident AI key: nothing may leave."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("CONFIDENT_API_KEY", raising=False)
    for name, value in DEEPEVAL_HARDENING.items():
        assert os.environ.get(name) == value, name
    ensure_no_confident_upload()


def _contexts(rows: list[dict]) -> list[str]:
    return [text for row in rows for text in row["context"]]


def test_the_corpora_hold_the_awkward_text(corpora):
    """Each origin really exercises `|` and non-ASCII inside context strings."""
    for origin, rows in corpora.items():
        texts = _contexts(rows)
        assert rows and texts, origin
        assert any("|" in t for t in texts), origin
        assert any(any(ord(ch) > 127 for ch in t) for t in texts), origin
    awkward = _contexts(corpora["converted awkward records"])
    assert set(AWKWARD_TURNS) <= set(awkward)
    assert corpora["converted bundled sample"] == corpora["committed sample"]


def test_every_golden_row_round_trips_through_deepeval_golden(corpora):
    defaults = {k: v for k, v in Golden(input="x").model_dump().items() if k not in OUR_FIELDS}
    for origin, rows in corpora.items():
        for row in rows:
            assert set(row) == set(OUR_FIELDS), (origin, row["name"])
            for golden in (Golden(**row), Golden.model_validate(row)):
                dumped = golden.model_dump()
                assert {k: dumped[k] for k in OUR_FIELDS} == row, (origin, row["name"])
                # Field by field, with types: lists stay lists, nothing coerced or joined.
                assert golden.context == row["context"]
                assert type(golden.context) is list
                assert golden.additional_metadata == row["additional_metadata"]
                # Every other deepeval field is left at its default.
                rest = {k: v for k, v in dumped.items() if k not in OUR_FIELDS}
                assert rest == defaults, (origin, row["name"])


def test_golden_json_lines_round_trip_through_deepeval_json(corpora):
    """The JSONL line itself parses as a deepeval Golden and re-serialises to equal JSON."""
    for origin, rows in corpora.items():
        for row in rows:
            line = json.dumps(row, ensure_ascii=False)
            golden = Golden.model_validate_json(line)
            back = json.loads(golden.model_dump_json(include=set(OUR_FIELDS)))
            assert back == row, (origin, row["name"])


def test_our_golden_model_uses_deepeval_field_names():
    """The project's own row model (corpus/models.py) writes only deepeval Golden fields,
    under their field names (not deepeval's camelCase serialisation aliases)."""
    assert set(OurGolden.model_fields) == set(OUR_FIELDS)
    assert set(OUR_FIELDS) <= set(Golden.model_fields)


def test_deepeval_reads_our_goldens_file_unchanged(corpora, no_network):
    """deepeval's own JSONL loader keeps our list-valued context as is."""
    dataset = EvaluationDataset()
    dataset.add_goldens_from_jsonl_file(str(COMMITTED_GOLDENS))
    rows = corpora["committed sample"]
    assert len(dataset.goldens) == len(rows)
    for golden, row in zip(dataset.goldens, rows, strict=True):
        dumped = golden.model_dump()
        assert {k: dumped[k] for k in OUR_FIELDS} == row


def test_deepeval_save_as_joins_context_with_a_bar(corpora, tmp_path, no_network, capsys):
    """Why goldens.jsonl is written by our own writer: deepeval's `save_as` (JSONL and CSV,
    a local file write; no network) stores `context` as one `|`-joined string. Two goldens
    whose contexts differ ([a | b] vs [a, b]) are saved identically, and a turn holding `|`
    comes back split into pieces."""
    bar_turn = "cat *.csv | wc -l"
    one_turn = Golden(input="q1", expected_output="x", context=["x " + bar_turn], name="one")
    two_turns = Golden(
        input="q1", expected_output="x", context=["x cat *.csv ", " wc -l"], name="two"
    )
    real = [
        row for rows in corpora.values() for row in rows if any("|" in t for t in row["context"])
    ]
    goldens = [one_turn, two_turns, *(Golden(**row) for row in real[:3])]
    dataset = EvaluationDataset(goldens=goldens)

    saved = Path(dataset.save_as("jsonl", str(tmp_path), file_name="deepeval_saved"))
    assert saved.parent == tmp_path and sorted(p.name for p in tmp_path.iterdir()) == [
        "deepeval_saved.jsonl"
    ]
    lines = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    assert all(isinstance(line["context"], str) for line in lines)  # a list became one string
    assert (
        lines[0]["context"] == lines[1]["context"] == "x cat *.csv | wc -l"
    )  # two goldens, one cell
    for line, golden in zip(lines, goldens, strict=True):
        assert line["context"] == "|".join(golden.context)

    reloaded = EvaluationDataset()
    reloaded.add_goldens_from_jsonl_file(str(saved))
    assert [g.context for g in reloaded.goldens[:2]] == [["x cat *.csv ", " wc -l"]] * 2
    for golden, original in zip(reloaded.goldens[2:], real[:3], strict=True):
        assert golden.context != original["context"]  # the evidence turns were cut apart
        assert len(golden.context) > len(original["context"])

    csv_path = Path(dataset.save_as("csv", str(tmp_path), file_name="deepeval_saved"))
    with csv_path.open(encoding="utf-8", newline="") as fh:
        cells = [row["context"] for row in csv.DictReader(fh)]
    assert cells[0] == cells[1] == "x cat *.csv | wc -l"

    # The same goldens through our writer's form keep every boundary.
    ours = [json.loads(json.dumps(g.model_dump(include=set(OUR_FIELDS)))) for g in goldens]
    assert [o["context"] for o in ours] == [g.context for g in goldens]
    assert "saved at" in capsys.readouterr().out  # deepeval's own message; a local path
