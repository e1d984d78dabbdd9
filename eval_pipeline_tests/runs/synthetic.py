"""Synthetic run bundles with the real layout (written by `write_bundle`, summarized by
`summarize`), so comparison, calibration and reports are tested on what a run writes."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.batches import partitioning_pin
from eval_pipeline.llm.accounting import RoleUsage, UsageSnapshot
from eval_pipeline.llm.config import ROLE_NAMES
from eval_pipeline.runs.bundle import write_bundle
from eval_pipeline.runs.calibrate import FloorEstimate, NoiseFloor, TierFloor
from eval_pipeline.runs.load import RunBundle, load_run
from eval_pipeline.runs.pins import COMPARABILITY_PINS, CONFIGURATION_PINS, pin_values
from eval_pipeline.score.retrieval_metrics import KS, LEVELS, METRIC_NAMES, VARIANTS
from eval_pipeline.score.summary import summarize

T0 = datetime(2026, 1, 1, tzinfo=UTC)

BASE_PINS: dict[str, Any] = {
    "corpus": {
        "upstream": {
            "source": "huggingface",
            "variant": "s",
            "revision": "98d7416c24c778c2fee6e6f3006e7a073259d48f",
            "sha256": "a" * 64,
        },
        "sample_spec": {"sample": None, "seed": 0, "floor": 1, "max_sessions_per_question": None},
        "subsampled": False,
        "tiers": "1",
        "tier2_digest": None,
        "goldens_sha256": "b" * 64,
        "fixtures_sha256": "c" * 64,
    },
    "graph": {"backend": "arcadedb", "server_version": "ArcadeDB 26.10.2", "schema_version": 1},
    "reconciler": {"name": "extractive", "version": "1"},
    "retriever": {"retriever": "fulltext", "version": 1},
    "scope": "question",
    "top_k": 10,
    "reader": "offline:extractive",
    "reader_prompt": {"version": 3, "prompt": None, "prompt_hash": None},
    "judge": {
        "model": "openai:gpt-4o-mini",
        "prompt_hash": "sha256:1234",
        "criteria_prompt_hash": "sha256:5678",
        "invariant_prompt_hash": "sha256:4321",
    },
    "gate": {"evidence_recall": "recall_all@10"},
    "tokenizer": {"tokenizer": "o200k_base", "bpe_sha256": "d" * 64},
    "code_version": "0.1.0+abc1234",
}

# One entry per comparability pin: where it lives under manifest["pins"], and another value.
PIN_CHANGES: dict[str, tuple[str, Any]] = {
    "corpus.revision": ("corpus.upstream.revision", "0" * 40),
    "corpus.sha256": ("corpus.upstream.sha256", "f" * 64),
    "corpus.variant": ("corpus.upstream.variant", "m"),
    "corpus.sample_spec": ("corpus.sample_spec.seed", 7),
    "corpus.subsampled": ("corpus.subsampled", True),
    "corpus.tiers": ("corpus.tiers", "all"),
    "corpus.tier2_digest": ("corpus.tier2_digest", "e" * 64),
    # Whole: the planted set (none in the base run, as in a bundle from before canaries).
    "corpus.canaries": (
        "corpus.canaries",
        {"version": 1, "sha256": "9" * 64, "file": "c.json", "questions": 4, "sessions": 4},
    ),
    "scope": ("scope", "batch"),
    "judge.model": ("judge.model", "anthropic:claude-haiku"),
    "judge.prompt_hash": ("judge.prompt_hash", "sha256:9999"),
    "judge.criteria_prompt_hash": ("judge.criteria_prompt_hash", "sha256:8888"),
    "judge.weights_sha256": ("judge.role.weights.sha256", "a" * 64),
    "judge.invariant_prompt_hash": ("judge.invariant_prompt_hash", "sha256:7777"),
    "tokenizer": ("tokenizer.tokenizer", "cl100k_base"),
    "reader": ("reader", "openai:gpt-4o"),
    # The reader's rules or prompt (an LLM reader under LongMemEval's prompt, say).
    "reader.prompt": ("reader_prompt.version", 2),
    "gate": ("gate.evidence_recall", "recall_all@5"),
    "graph.schema_version": ("graph.schema_version", 2),
    # Whole: a manifest pins all of it (batches, assignment, version) or, from before
    # batches, none of it.
    "partitioning": ("partitioning", partitioning_pin(2)),
    # Whole: the errata pin of a run that left a question out (exclude mode).
    "errata.excluded": ("errata", {"mode": "exclude", "applied": True, "excluded": ["370a8ff4"]}),
}


def set_pin(pins: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    pins = copy.deepcopy(pins)
    node = pins
    *parents, last = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return pins


def manifest(pins: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "pins": copy.deepcopy(pins if pins is not None else BASE_PINS),
        "comparable": True,
        "llm_usage": {"retrieval": None, "reconcile": None, "judge": None},
        "stages": {
            "injected_graph": {"seconds": 8.5, "run_id": "r1"},
            "retrieval_results": {"seconds": 5.25, "run_id": "r1"},
            "scored_run": {"seconds": None, "run_id": None},
        },
        "started_at": T0.isoformat(),
        "ended_at": T0.isoformat(),
        **extra,
    }


def row(
    qid: str,
    covered: bool | None,
    *,
    tier: int = 1,
    qtype: str = "multi-session",
    abstention: bool = False,
    tokens: int = 100,
    weakest: str | None = "default",
) -> dict[str, Any]:
    """A results.jsonl row. covered None: the gating judge errored (unscored)."""
    if weakest == "default":
        weakest = "evidence_recall" if covered is False else None
    recall = None if abstention else (1.0 if covered else 0.0)
    retrieval = {
        level: {
            variant: {f"{name}@{k}": recall for name in METRIC_NAMES for k in KS}
            for variant in VARIANTS
        }
        for level in LEVELS
    }
    retrieval["excluded"] = {v: ("abstention question" if abstention else None) for v in VARIANTS}
    judge = {
        "score": None if covered is None else float(bool(covered)),
        "threshold": 1.0,
        "passed": covered,
        "gating": True,
        "reason": "judge outage" if covered is None else "judged",
        "error": "HTTP 500" if covered is None else None,
    }
    return {
        "question_id": qid,
        "tier": tier,
        "question_type": qtype,
        "abstention": abstention,
        "retrieved_turn_ids": [],
        "retrieved_session_ids": [],
        "retrieval_context": ["context"] if tokens else [],
        "answer": "an answer",
        "expected_output": "expected",
        "metrics": {"answer_judge": judge},
        "retrieval_metrics": retrieval,
        "covered": covered,
        "weakest_link": weakest,
        "payload_tokens": tokens,
        "latency_ms": {"retrieval": 1.0, "reader": 0.0},
        "queries": [],
        "errors": [],
    }


_counter = iter(range(1_000_000))


def write_run(
    runs_dir: Path,
    rows: list[dict[str, Any]],
    *,
    label: str = "run",
    pins: dict[str, Any] | None = None,
    started: datetime | None = None,
    **manifest_extra: Any,
) -> Path:
    """Each call gets a later start time than the previous one, so name order = call order."""
    started = started or T0 + timedelta(minutes=next(_counter))
    m = manifest(pins, **manifest_extra)
    m["started_at"] = started.isoformat()
    return write_bundle(
        runs_dir, manifest=m, rows=rows, summary=summarize(rows), label=label, started=started
    )


def outcomes(prefix: str, values: list[bool | None], **kw: Any) -> list[dict[str, Any]]:
    return [row(f"{prefix}{i}", v, **kw) for i, v in enumerate(values)]


def hand_floor(run: RunBundle | Path, floor_pp: float, by_type: dict[str, float] | None = None):
    """A noise floor with chosen values, valid for `run`'s pins."""
    run = run if isinstance(run, RunBundle) else load_run(run)

    def est(value: float) -> FloorEstimate:
        return FloorEstimate(
            floor_pp=value,
            spread_pp=value,
            bootstrap_half_width_pp=value,
            rates=[],
            questions=0,
            unstable=0,
        )

    return NoiseFloor(
        created_at=T0.isoformat(),
        runs=[],
        pins=pin_values(run, COMPARABILITY_PINS),
        configuration=pin_values(run, CONFIGURATION_PINS),
        tiers={
            tier: TierFloor(
                coverage=est(floor_pp),
                by_type={t: est(v) for t, v in (by_type or {}).items()},
            )
            for tier in run.tiers()
        },
        questions={},
        stability={},
        stability_line="",
    )


def repeat_of(salt: str, k: int, of: int = 3, *, includes_reconcile: bool = False) -> dict:
    """`manifest["repeat"]` as `eval-pipeline run --repeat N` writes it for repeat k."""
    return {
        "index": k,
        "of": of,
        "salt": salt,
        "sample_identity": f"{salt}/{k}",
        "includes_reconcile": includes_reconcile,
    }


def role_usage(
    role: str = "judge",
    *,
    calls: int = 10,
    hits: int = 0,
    replayed: int = 0,
    identity: str | None = None,
    legacy: bool = False,
) -> dict[str, Any]:
    """One role's accounting (a RoleUsage dump, as the reconciler reports it). `legacy`: as
    written before replay accounting (no cache_replayed, no sample_identity)."""
    usage = RoleUsage(
        role=role,
        provider="openai",
        model="gpt-4o-mini",
        calls=calls,
        cache_hits=hits,
        cache_replayed=replayed,
        provider_requests=calls - hits,
        sample_identity=identity,
    ).model_dump(mode="json")
    if legacy:
        del usage["cache_replayed"], usage["sample_identity"]
    return usage


def usage_snapshot(
    role: str = "judge",
    *,
    identity: str | None = None,
    origin: str | None = None,
    legacy: bool = False,
    **counts: Any,
) -> dict[str, Any]:
    """A stage's accounting as the LLM layer exports it (`UsageSnapshot.to_metadata()`): the
    other roles offline and unused; each call a fresh origin unless one is given."""
    roles = {
        name: RoleUsage(role=name, provider="offline", model=None, sample_identity=identity)
        for name in ROLE_NAMES
    }
    snapshot = UsageSnapshot(
        roles=roles,
        total_cost_usd=0.0,
        sample_identity=identity,
        origin=origin or uuid.uuid4().hex[:16],
    ).to_metadata()
    snapshot["roles"][role] = role_usage(role, identity=identity, legacy=legacy, **counts)
    if legacy:
        del snapshot["sample_identity"], snapshot["origin"]
        for entry in snapshot["roles"].values():
            entry.pop("cache_replayed", None)
            entry.pop("sample_identity", None)
    return snapshot


# --- bundles for the reports: question text, infrastructure failures, no judge, tier 2 -----


def golden(
    qid: str,
    text: str,
    *,
    tier: int = 1,
    qtype: str = "multi-session",
    abstention: bool = False,
    use_case: str = "BUG",
    difficulty: str = "easy",
    source_mix: tuple[str, ...] = ("doc",),
    dimensions: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A goldens.jsonl row (the fields reports and tier-2 panels read)."""
    meta: dict[str, Any] = {"tier": tier, "question_type": qtype, "abstention": abstention}
    if tier == 2:
        meta.update(
            use_case=use_case,
            difficulty=difficulty,
            source_mix=list(source_mix),
            dimensions=list(dimensions),
        )
    return {"input": text, "expected_output": "expected", "name": qid, "additional_metadata": meta}


def infra_row(
    qid: str,
    cause: str = "graph_server",
    *,
    stage: str = "retrieval",
    error: str = "ServiceUnavailable: graph server stopped answering",
    **kw: Any,
) -> dict[str, Any]:
    """A row the pipeline's own failure left unscored, as the scorer writes it."""
    r = row(qid, None, **kw)
    r["infra_failures"] = [{"stage": stage, "cause": cause, "error": error}]
    if stage == "retrieval":
        for level in LEVELS:
            for variant in VARIANTS:
                values = r["retrieval_metrics"][level][variant]
                r["retrieval_metrics"][level][variant] = dict.fromkeys(values)
        r["retrieval_metrics"]["excluded"] = dict.fromkeys(
            VARIANTS, f"unscored: infrastructure failure ({cause})"
        )
        r["payload_tokens"] = None
        r["retrieval_context"] = []
        r["answer"] = None
    r["metrics"]["answer_judge"].update(
        reason="not judged: retrieval was not measured" if stage == "retrieval" else "judge failed",
        error=None if stage == "retrieval" else error,
    )
    return r


def no_judge_row(qid: str, covered: bool, *, abstention: bool = False, **kw: Any) -> dict:
    """A row of a run without a judge: evidence recall alone gates an answerable question;
    the judged metrics are unscored, so an abstention question is undecided (unscored)."""
    r = row(qid, None if abstention else covered, abstention=abstention, **kw)
    recall = r["retrieval_metrics"]["turn"]["all"]["recall_all@10"]
    r["metrics"] = {
        "evidence_recall": {
            "score": recall,
            "threshold": None if abstention else 1.0,
            "passed": None if abstention else covered,
            "gating": not abstention,
            "reason": "abstention question: no evidence to recall"
            if abstention
            else f"turn recall_all@10 over all evidence turns = {recall:g}",
            "error": None,
        },
        **{
            name: {
                "score": None,
                "threshold": None,
                "passed": None,
                "gating": False,
                "reason": "unscored: no judge",
                "error": None,
            }
            for name in ("answer_judge", "answer_coverage", "contextual_recall")
        },
    }
    return r


def with_citations(r: dict[str, Any], precision: float | None, recall: float | None) -> dict:
    """A tier-2 row with its citation metrics (and the criteria score, unscored: no judge)."""
    for name, score in (("citation_precision", precision), ("citation_recall", recall)):
        r["metrics"][name] = {
            "score": score,
            "threshold": None,
            "passed": None,
            "gating": False,
            "reason": "cited",
            "error": None,
        }
    r["metrics"]["criteria_score"] = {
        "score": None,
        "threshold": None,
        "passed": None,
        "gating": False,
        "reason": "unscored: no judge",
        "error": None,
    }
    return r


def write_run_with_goldens(
    runs_dir: Path,
    rows: list[dict[str, Any]],
    goldens: list[dict[str, Any]] | None,
    *,
    label: str = "run",
    pins: dict[str, Any] | None = None,
    **manifest_extra: Any,
) -> Path:
    """A bundle as `scored_run` writes it: the goldens artifact named in the manifest (its
    sha256 pinned), tier-2 panels in the summary, the status in the manifest. `goldens`
    None: the manifest names no goldens artifact."""
    from eval_pipeline.corpus.jsonl import write_jsonl
    from eval_pipeline.corpus.upstream import file_sha256
    from eval_pipeline.tier2.panels import tier2_panels

    started = T0 + timedelta(minutes=next(_counter))
    pins = copy.deepcopy(pins if pins is not None else BASE_PINS)
    m = manifest(pins, **manifest_extra)
    if goldens is not None:
        artifact = Path(runs_dir) / "_artifacts" / uuid.uuid4().hex[:12] / "goldens"
        artifact.mkdir(parents=True)
        write_jsonl(artifact / "goldens.jsonl", goldens)
        pins = set_pin(pins, "corpus.goldens_sha256", file_sha256(artifact / "goldens.jsonl"))
        m["pins"] = pins
        m["stages"] = {"goldens": {"run_id": "r0", "seconds": 0.1, "artifact": str(artifact)}}
        m["stages"].update(manifest()["stages"])
    summary = summarize(rows)
    if "2" in summary["tiers"]:
        summary["tiers"]["2"]["panels"] = tier2_panels(rows, goldens or [])
    m.update(started_at=started.isoformat(), status=summary["status"])
    m["incomplete"] = summary["incomplete"]
    return write_bundle(
        runs_dir, manifest=m, rows=rows, summary=summary, label=label, started=started
    )
