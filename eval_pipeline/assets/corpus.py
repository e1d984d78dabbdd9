"""Corpus stage assets: longmemeval_upstream → goldens → session_fixtures, with their checks.

Data lives in files, in each asset's run-scoped artifact directory (`assets/artifacts.py`), so
each asset returns a MaterializeResult (metadata only) and the next one reads the artifact of
the materialization it consumes.
"""

import json
import shutil
from collections import Counter
from pathlib import Path

import dagster as dg

from eval_pipeline.assets import GROUP
from eval_pipeline.assets.artifacts import (
    ARTIFACT_META,
    StageRecord,
    input_record,
    latest_artifact_dirs,
    own_record,
    prune_artifacts,
    publish,
)
from eval_pipeline.assets.resources import CorpusSettings, ProjectPaths
from eval_pipeline.corpus.convert import (
    FIXTURES_FILE,
    GOLDENS_FILE,
    MANIFEST_FILE,
    PLAN_FILE,
    CorpusPlan,
    build_fixtures,
    evidence_report,
    iter_questions,
    manifest_for,
    oracle_by_content,
    plan_corpus,
)
from eval_pipeline.corpus.jsonl import read_jsonl, write_json, write_jsonl
from eval_pipeline.corpus.tiers import append_tier2_fixtures, select_tiers
from eval_pipeline.corpus.upstream import (
    ResolvedUpstream,
    check_revision,
    check_variant,
    file_sha256,
    resolve_upstream,
)
from eval_pipeline.ops.sensors import records_failures

UPSTREAM_FILE = "upstream.json"


def _md_table(header: list[str], rows: list[list[object]]) -> dg.MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def load_upstream(record: StageRecord) -> ResolvedUpstream:
    return ResolvedUpstream.model_validate_json(
        record.file(UPSTREAM_FILE).read_text(encoding="utf-8")
    )


def load_plan(record: StageRecord) -> CorpusPlan:
    """The corpus plan a `goldens` artifact holds (its plan.json and goldens.jsonl)."""
    raw = json.loads(record.file(PLAN_FILE).read_text(encoding="utf-8"))
    return CorpusPlan.from_json(raw, list(read_jsonl(record.file(GOLDENS_FILE))))


def _artifact_meta(record_dir: Path) -> dict[str, dg.MetadataValue]:
    return {ARTIFACT_META: dg.MetadataValue.path(str(record_dir))}


@dg.asset(group_name=GROUP, description="The pinned LongMemEval file, verified by sha256.")
@records_failures
def longmemeval_upstream(
    context: dg.AssetExecutionContext, paths: ProjectPaths, corpus: CorpusSettings
) -> dg.MaterializeResult:
    upstream = resolve_upstream(corpus.upstream_spec(), verify=True)
    by_type: Counter[str] = Counter()
    abstention = 0
    for q in iter_questions(upstream.path):
        by_type[q.question_type] += 1
        abstention += q.abstention
    context.log.info(f"upstream {upstream.file_name}: {sum(by_type.values())} records")
    # A new corpus is where old run artifacts are let go of (the latest ones are kept).
    prune_artifacts(paths.root(), latest_artifact_dirs(context.instance))
    with publish(paths.root(), "longmemeval_upstream", context.run.run_id) as pub:
        write_json(pub.stage / UPSTREAM_FILE, upstream.model_dump())
        pub.facts.update(upstream=upstream.model_dump(), records=sum(by_type.values()))
    return dg.MaterializeResult(
        metadata={
            "source": upstream.source,
            "file": upstream.file_name,
            "variant": upstream.variant,
            "revision": upstream.revision or "none (not a Hugging Face source)",
            "sha256": upstream.sha256,
            "sha256_pinned": upstream.pinned,
            "bytes": upstream.bytes,
            "records": sum(by_type.values()),
            "abstention": abstention,
            "by_question_type": _md_table(
                ["question_type", "records"], [[t, n] for t, n in sorted(by_type.items())]
            ),
            "path": dg.MetadataValue.path(upstream.path),
            **_artifact_meta(pub.final),
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=[longmemeval_upstream],
    description="Golden JSONL (deepeval Golden shape), sampled by (question_type, abstention).",
)
@records_failures
def goldens(
    context: dg.AssetExecutionContext, paths: ProjectPaths, corpus: CorpusSettings
) -> dg.MaterializeResult:
    tier1, tier2 = corpus.tier_selection()
    upstream_record = input_record(context, "longmemeval_upstream")
    plan = plan_corpus(load_upstream(upstream_record), corpus.sample_spec())
    plan = select_tiers(plan, tier1=tier1, tier2=tier2, light=corpus.light)
    inputs = {"longmemeval_upstream": upstream_record}
    with publish(paths.root(), "goldens", context.run.run_id, inputs) as pub:
        write_jsonl(pub.stage / GOLDENS_FILE, plan.goldens)
        write_json(pub.stage / PLAN_FILE, plan.to_json())
        pub.facts.update(
            questions=len(plan.goldens),
            goldens_sha256=file_sha256(pub.stage / GOLDENS_FILE),
            sample_spec=plan.spec.model_dump(),
            tiers=plan.tiers,
        )
    context.log.info(
        f"{len(plan.goldens)} goldens (tiers {plan.tiers}) from "
        f"{plan.file_stats['records']} upstream records"
    )
    if plan.sample_note:
        context.log.warning(f"note: {plan.sample_note}")
    evidence = evidence_report(plan.goldens)
    out_dir = pub.final
    return dg.MaterializeResult(
        metadata={
            "questions": len(plan.goldens),
            "tiers": plan.tiers,
            "tier2_questions": (plan.tier2 or {}).get("questions", 0),
            "abstention": sum(g["additional_metadata"]["abstention"] for g in plan.goldens),
            "sample_spec": dg.MetadataValue.json(plan.spec.model_dump()),
            "sample_requested": plan.requested_sample,
            "sample_note": dg.MetadataValue.text(plan.sample_note or ""),
            "strata": _md_table(
                ["stratum", "available", "selected"],
                [[k, v["available"], v["selected"]] for k, v in plan.strata.items()],
            ),
            "without_evidence_unexpected": len(evidence["without_evidence_turns_unexpected"]),
            "path": dg.MetadataValue.path(str(out_dir / GOLDENS_FILE)),
            **_artifact_meta(out_dir),
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=[goldens],
    description="Haystack sessions of the sampled questions, deduplicated across the batch.",
)
@records_failures
def session_fixtures(
    context: dg.AssetExecutionContext, paths: ProjectPaths
) -> dg.MaterializeResult:
    goldens_record = input_record(context, "goldens")
    plan = load_plan(goldens_record)
    inputs = {"goldens": goldens_record}
    with publish(paths.root(), "session_fixtures", context.run.run_id, inputs) as pub:
        spill = pub.stage / ".spill"
        spill.mkdir()
        stats = build_fixtures(plan, pub.stage / FIXTURES_FILE, spill_dir=spill)
        stats = append_tier2_fixtures(plan, pub.stage / FIXTURES_FILE, stats)
        manifest = manifest_for(plan, stats, goldens_record.facts["goldens_sha256"])
        write_json(pub.stage / MANIFEST_FILE, manifest)
        shutil.rmtree(spill, ignore_errors=True)
        pub.facts.update(
            fixtures_sha256=stats["sha256"],
            goldens_sha256=goldens_record.facts["goldens_sha256"],
            sessions=stats["sessions"],
            turns=stats["turns"],
            comparable=manifest["comparable"],
        )
    context.log.info(f"{stats['sessions']} sessions, {stats['turns']} turns")
    out_dir = pub.final
    return dg.MaterializeResult(
        metadata={
            **{k: v for k, v in stats.items() if k != "sha256"},
            "comparable": manifest["comparable"],
            "fixtures_sha256": stats["sha256"],
            "path": dg.MetadataValue.path(str(out_dir / FIXTURES_FILE)),
            "manifest": dg.MetadataValue.path(str(out_dir / MANIFEST_FILE)),
            **_artifact_meta(out_dir),
        }
    )


# ---- checks -------------------------------------------------------------------------
# Each check reads the artifact of the materialization it checks: this run's, else the latest.


def _checked_upstream(context: dg.AssetCheckExecutionContext) -> ResolvedUpstream:
    return load_upstream(own_record(context, "longmemeval_upstream"))


@dg.asset_check(asset=longmemeval_upstream, blocking=True, description="Exact commit pinned.")
def upstream_revision_pinned(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    up = _checked_upstream(context)
    if up.source == "huggingface":
        try:
            check_revision(up.revision or "")
        except ValueError as exc:
            return dg.AssetCheckResult(passed=False, description=str(exc))
        return dg.AssetCheckResult(passed=True, metadata={"revision": up.revision})
    # Files outside the hub have no revision; their pin is the sha256.
    return dg.AssetCheckResult(
        passed=up.pinned,
        severity=dg.AssetCheckSeverity.WARN,
        description=None if up.pinned else "local file with no sha256 pin: recorded by digest",
        metadata={"source": up.source, "sha256": up.sha256},
    )


@dg.asset_check(asset=longmemeval_upstream, blocking=True, description="File matches its pin.")
def upstream_sha256_matches(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    up = _checked_upstream(context)
    actual = file_sha256(up.path)
    return dg.AssetCheckResult(
        passed=actual == up.sha256 and (not up.expected_sha256 or actual == up.expected_sha256),
        metadata={"actual": actual, "expected": up.expected_sha256 or "unpinned"},
    )


@dg.asset_check(
    asset=longmemeval_upstream,
    blocking=True,
    description="Not the oracle variant, by label and by content (some haystack holds a "
    "distractor session).",
)
def upstream_not_oracle(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    up = _checked_upstream(context)
    try:
        check_variant(up.variant)
    except ValueError as exc:
        return dg.AssetCheckResult(passed=False, description=str(exc))
    if oracle_by_content(up.path):
        return dg.AssetCheckResult(
            passed=False,
            description="no haystack holds a distractor session: this is the oracle variant "
            "by content, whatever its name",
        )
    return dg.AssetCheckResult(passed=True, metadata={"variant": up.variant})


@dg.asset_check(asset=goldens, description="Every answerable golden has an evidence turn.")
def goldens_have_evidence(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    record = own_record(context, "goldens")
    report = evidence_report(list(read_jsonl(record.file(GOLDENS_FILE))))
    unexpected = report["without_evidence_turns_unexpected"]
    return dg.AssetCheckResult(
        passed=not unexpected,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "unexpected_without_evidence": dg.MetadataValue.json(unexpected),
            "abstention_without_evidence": dg.MetadataValue.json(
                report["without_evidence_turns_abstention"]
            ),
            "assistant_side_evidence_only": dg.MetadataValue.json(
                report["assistant_side_evidence_only"]
            ),
        },
    )


def missing_haystack_sessions(goldens_path: Path, fixtures_path: Path) -> list[str]:
    """`question_id: session_id` pairs a golden names but the fixtures do not hold."""
    membership: dict[str, set[str]] = {}
    for fx in read_jsonl(fixtures_path):
        membership[fx["session_id"]] = set(fx["question_ids"])
    missing = []
    for g in read_jsonl(goldens_path):
        for sid in g["additional_metadata"]["haystack_session_ids"]:
            if g["name"] not in membership.get(sid, ()):
                missing.append(f"{g['name']}: {sid}")
    return missing


@dg.asset_check(asset=session_fixtures, blocking=True, description="Every haystack is present.")
def fixtures_cover_haystacks(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    record = own_record(context, "session_fixtures")
    missing = missing_haystack_sessions(
        record.inputs["goldens"].file(GOLDENS_FILE), record.file(FIXTURES_FILE)
    )
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"missing": len(missing), "first_missing": dg.MetadataValue.json(missing[:20])},
    )


CORPUS_ASSETS = [longmemeval_upstream, goldens, session_fixtures]
CORPUS_CHECKS = [
    upstream_revision_pinned,
    upstream_sha256_matches,
    upstream_not_oracle,
    goldens_have_evidence,
    fixtures_cover_haystacks,
]
