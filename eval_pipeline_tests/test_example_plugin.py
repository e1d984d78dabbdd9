"""The example memory system in examples/notes_memory, outside the package, end to end: loaded
by import path, its own schema and consolidation over the bundled sample in a real graph, the
memory checks, retrieval over what its schema declares searchable with recall through
provenance, and the whole `eval-pipeline run` chain (in this process, `chain_runner`)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile import memory_checks
from eval_pipeline.reconcile.registry import load_reconciler
from eval_pipeline.reconcile.runner import reconcile_pending
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.protocol import RetrievalEnv
from eval_pipeline.retrieve.provenance import ProvenanceResolver
from eval_pipeline.retrieve.reader import make_reader
from eval_pipeline.retrieve.runner import QuestionInput, RetrievalRunner
from eval_pipeline.score.retrieval_metrics import question_metrics

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "notes_memory"
SPEC = "notes_memory:NotesMemory"
SAMPLE = ROOT / "corpus" / "sample"
_databases = itertools.count()


@pytest.fixture
def example_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    return EXAMPLE


@pytest.fixture
def sample_store(graph_dir: Path) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(graph_dir), database=f"ex{next(_databases)}", heap="512m")
    inject_fixtures(store, SAMPLE / "fixtures.jsonl")
    yield store
    store.close()


def _golden(question_id: str) -> dict:
    return next(g for g in read_jsonl(SAMPLE / "goldens.jsonl") if g["name"] == question_id)


def test_the_example_forms_memory_by_its_own_schema(example_path, sample_store):
    plugin = load_reconciler(SPEC)
    assert plugin.pins()["schema"]["name"] == "notes-memory"
    report = reconcile_pending(sample_store, plugin, concurrency=2)
    assert report.failures == [] and report.completeness == 1.0
    assert report.namespaces["namespaces"] == 31  # one per question of the sample
    assert report.graph_nodes["Chunk"] == 0 and report.graph_nodes["Episode"] == 0
    assert report.graph_nodes["Fact"] > 0 and report.namespaces["superseded"] > 0
    # Extraction once per session, consolidation once per (namespace, session).
    assert report.namespaces["sessions_extracted"] < report.namespaces["sessions_consolidated"]
    for check in (
        memory_checks.duplicate_entities,
        memory_checks.supersession_complete,
        memory_checks.provenance_complete,
    ):
        assert check(sample_store).problems == [], check.__name__

    # Retrieval searches what the schema declared: turns and notes, no chunk or episode.
    retriever = FulltextRetriever(RetrievalEnv(store=sample_store))
    # What its schema declares searchable, and not the transcript beside it.
    assert [s.source.kind for s in retriever.sources()] == ["fact"]
    runner = RetrievalRunner(
        retriever,
        make_reader("offline", None),
        scope="question",
        top_k=10,
        provenance=ProvenanceResolver(sample_store),
    )
    golden = _golden("e8b3f5d2")  # knowledge update: the sister moved from Leeds to Zürich
    meta = golden["additional_metadata"]
    result = runner.run_one(
        QuestionInput(
            question_id="e8b3f5d2", question=golden["input"], question_date=meta["question_date"]
        )
    )
    notes = [i.text for i in result.items if i.kind == "fact"]
    zurich = next(n for n, t in enumerate(notes) if "Zürich" in t)
    leeds = next(n for n, t in enumerate(notes) if "Leeds" in t)
    assert zurich < leeds, notes  # the current note first, the superseded one kept
    roles = dict(zip(meta["evidence_turn_ids"], meta["evidence_turn_roles"], strict=True))
    notes_only = [t for i in result.items if i.kind == "fact" for t in i.turn_ids]
    recall = question_metrics(notes_only, roles, meta["evidence_session_ids"], False)
    assert recall["turn"]["upstream"]["recall_all@10"] == 1.0  # through the notes' provenance


@pytest.mark.slow
def test_the_example_runs_the_whole_chain(example_path: Path, chain):
    # In this process, the example importable as its users make it: on the path.
    res = chain.run("--reconciler", SPEC, "--label", "notes")
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = res.run_dir
    manifest = json.loads((run_dir / "manifest.json").read_text())
    reconciler = manifest["pins"]["reconciler"]
    assert reconciler["name"] == "notes-memory"
    assert reconciler["schema"]["name"] == "notes-memory" and reconciler["schema"]["version"] == "1"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete"
    recall = summary["tiers"]["1"]["retrieval"]["turn"]["upstream"]["recall_any@10"]["mean"]
    assert recall is not None and recall > 0
