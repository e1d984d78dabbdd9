"""Evidence recall through provenance: a retrieved memory node whose text was rewritten counts
for the turns it came from — built-in facts, agent rows naming a fact, and a plug-in's own
label declared in its pins."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.graph.inject import inject_fixtures
from eval_pipeline.graph.store import GraphStore
from eval_pipeline.reconcile.registry import load_reconciler
from eval_pipeline.reconcile.runner import reconcile_pending
from eval_pipeline.retrieve.graph_agent import row_item
from eval_pipeline.retrieve.protocol import RetrievalOutput
from eval_pipeline.retrieve.provenance import ProvenanceResolver, ProvenanceSource
from eval_pipeline.retrieve.reader import make_reader
from eval_pipeline.retrieve.results import RetrievedItem
from eval_pipeline.retrieve.runner import QuestionInput, RetrievalRunner
from eval_pipeline.score.retrieval_metrics import question_metrics

from .namespace_fixtures import write_namespace_fixtures

_databases = itertools.count()
EVIDENCE = {"b_leeds#0": "user"}


@pytest.fixture
def consolidated(graph_dir: Path, tmp_path: Path) -> Iterator[GraphStore]:
    store = GraphStore(data_dir=str(graph_dir), database=f"pv{next(_databases)}", heap="512m")
    inject_fixtures(store, write_namespace_fixtures(tmp_path / "fixtures.jsonl"))
    reconcile_pending(store, load_reconciler("consolidating"), concurrency=2)
    yield store
    store.close()


def _leeds_fact(store: GraphStore) -> str:
    rows = store.read(
        "MATCH (f:Fact {namespace: 'user:qa', session_id: 'b_leeds'}) RETURN f.fact_id AS id"
    )
    return rows[0]["id"]


def _recall(items: list[RetrievedItem]) -> float | None:
    ranked = list(dict.fromkeys(t for i in items for t in i.turn_ids))
    return question_metrics(ranked, EVIDENCE, ["b_leeds"], False)["turn"]["upstream"][
        "recall_any@1"
    ]


def test_a_rewritten_fact_counts_for_its_turn(consolidated: GraphStore):
    fact = _leeds_fact(consolidated)
    item = RetrievedItem(
        text="The user's sister lives in Leeds.", turn_ids=[], session_ids=[], node_ids=[fact]
    )
    assert _recall([item]) == 0.0  # text alone proves nothing
    (resolved,) = ProvenanceResolver(consolidated)([item])
    assert resolved.turn_ids == ["b_leeds#0"] and resolved.session_ids == ["b_leeds"]
    assert _recall([resolved]) == 1.0


def test_an_agent_row_naming_a_fact_counts_for_its_turn(consolidated: GraphStore):
    fact = _leeds_fact(consolidated)
    item = row_item({"f.fact_id": fact, "f.text": "The user's sister lives in Leeds."})
    assert item.turn_ids == [] and fact in item.node_ids
    (resolved,) = ProvenanceResolver(consolidated)([item])
    assert resolved.turn_ids == ["b_leeds#0"]


def test_a_plugin_label_declared_in_its_pins_resolves_too(consolidated: GraphStore):
    consolidated.write_transaction(
        [
            (
                "MATCH (t:Turn {turn_id: 'b_leeds#0'}) "
                "CREATE (:Note {note_id: 'n1', body: 'sister: Leeds'})-[:DERIVED_FROM]->(t)",
                {},
            ),
            (
                "CREATE (:EvalPipelineMemory {pins_key: 'sha256:plugin', pins: $pins})",
                {
                    "pins": json.dumps(
                        {"schema": {"provenance": [["Note", "note_id", "DERIVED_FROM"]]}}
                    )
                },
            ),
        ]
    )
    resolver = ProvenanceResolver(consolidated)
    assert ProvenanceSource("Note", "note_id", "DERIVED_FROM") in resolver.sources()
    item = RetrievedItem(text="sister: Leeds", turn_ids=[], session_ids=[], node_ids=["n1"])
    assert resolver([item])[0].turn_ids == ["b_leeds#0"]


def test_declared_names_must_be_plain_identifiers():
    with pytest.raises(ValueError, match="plain identifiers"):
        ProvenanceSource("Note) DETACH DELETE (n", "id", "X")


class _RewritingRetriever:
    """Returns one rewritten fact by id only, as a memory system that paraphrases would."""

    name = "rewriting"

    def __init__(self, fact_id: str) -> None:
        self.fact_id = fact_id

    def retrieve(self, request, trace):
        return RetrievalOutput(
            items=[
                RetrievedItem(
                    text="Sister: Leeds.", turn_ids=[], session_ids=[], node_ids=[self.fact_id]
                )
            ]
        )

    def pins(self):
        return {"retriever": self.name}


def test_the_retrieval_runner_records_provenance_turns(consolidated: GraphStore):
    retriever = _RewritingRetriever(_leeds_fact(consolidated))
    question = QuestionInput(
        question_id="qa", question="Where does my sister live?", question_date="2023/06/01"
    )
    plain = RetrievalRunner(retriever, make_reader("offline", None), scope="question", top_k=5)
    assert plain.run_one(question).retrieved_turn_ids == []
    runner = RetrievalRunner(
        retriever,
        make_reader("offline", None),
        scope="question",
        top_k=5,
        provenance=ProvenanceResolver(consolidated),
    )
    result = runner.run_one(question)
    assert result.retrieved_turn_ids == ["b_leeds#0"] and result.errors == []
