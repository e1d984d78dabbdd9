"""The runner: one record per question, errors recorded as misses, never dropped."""

from __future__ import annotations

from eval_pipeline.corpus.jsonl import read_jsonl
from eval_pipeline.retrieve.protocol import RetrievalEnv, load_retriever
from eval_pipeline.retrieve.reader import ABSTENTION, ExtractiveReader
from eval_pipeline.retrieve.results import QuestionRetrieval
from eval_pipeline.retrieve.runner import (
    QuestionInput,
    RetrievalRunner,
    questions_from_goldens,
)
from eval_pipeline.settings import BUNDLED_CORPUS_DIR
from eval_pipeline_tests.retrieve.test_protocol import PLUGIN, _NoStore


class _FailingReader:
    label = "test:failing"

    def answer(self, question, question_date, context):
        raise RuntimeError("reader down")


def _questions() -> list[QuestionInput]:
    return [
        QuestionInput(question_id="q1", question="Where is my bike?", question_date="d1"),
        QuestionInput(question_id="q2", question="Please explode now", question_date="d2"),
        QuestionInput(question_id="q3", question="Where is my car?", question_date="d3", tier=2),
    ]


def _runner(reader=None) -> RetrievalRunner:
    retriever = load_retriever(f"{PLUGIN}:EchoRetriever", RetrievalEnv(store=_NoStore()))
    return RetrievalRunner(
        retriever,
        reader or ExtractiveReader(),
        scope="batch",
        top_k=5,
        count_tokens=lambda ctx: sum(len(c.split()) for c in ctx),
    )


def test_a_raising_retrieval_is_a_miss_and_the_batch_goes_on():
    progress: list[tuple[int, int, str]] = []
    results = list(
        _runner().run(_questions(), lambda d, t, r: progress.append((d, t, r.question_id)))
    )
    assert [r.question_id for r in results] == ["q1", "q2", "q3"]
    assert progress == [(1, 3, "q1"), (2, 3, "q2"), (3, 3, "q3")]
    ok, miss, tier2 = results
    # The echoed context only restates the question: the extractive reader abstains.
    assert ok.answer == ABSTENTION and ok.errors == []
    assert ok.retrieval_context == ["echo: Where is my bike?"] and ok.payload_tokens == 5
    assert ok.reader == "offline:extractive" and ok.retriever == "echo" and ok.scope == "batch"
    assert miss.items == [] and miss.retrieval_context == [] and miss.answer is None
    assert miss.errors == ["retrieval: RuntimeError: cannot handle q2"]
    assert len(miss.queries) == 1, "queries run before the failure are kept"
    assert miss.retrieval_latency_ms is not None and miss.payload_tokens == 0
    assert tier2.tier == 2
    for r in results:  # the contract round-trips through JSON
        assert QuestionRetrieval.model_validate_json(r.model_dump_json()) == r


def test_a_failing_reader_keeps_the_retrieval_and_records_no_answer():
    (result,) = _runner(_FailingReader()).run(_questions()[:1])
    assert result.items and result.answer is None
    assert result.errors == ["reader: RuntimeError: reader down"]


def test_extractive_reader_abstains_on_an_empty_context():
    reader = ExtractiveReader()
    assert reader.answer("anything?", "d", []) == ABSTENTION


def test_questions_from_the_bundled_goldens_carry_no_answer(tmp_path):
    from eval_pipeline.corpus.convert import build_corpus
    from eval_pipeline.corpus.sampling import SampleSpec
    from eval_pipeline.corpus.upstream import UpstreamSpec, resolve_upstream

    upstream = resolve_upstream(UpstreamSpec(source="sample"), verify=True)
    build_corpus(upstream, tmp_path, SampleSpec(sample=12, seed=0))
    rows = list(read_jsonl(tmp_path / "goldens.jsonl"))
    questions = questions_from_goldens(rows)
    assert [q.question_id for q in questions] == [r["name"] for r in rows]
    assert all(
        q.question_date == r["additional_metadata"]["question_date"]
        for q, r in zip(questions, rows, strict=True)
    )
    assert set(QuestionInput.model_fields) == {"question_id", "question", "question_date", "tier"}
    assert BUNDLED_CORPUS_DIR.is_dir()
