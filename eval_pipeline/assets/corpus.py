"""Corpus stage assets: longmemeval_upstream → goldens → session_fixtures, with their checks.

Data lives in files under the corpus directory, so each asset returns a MaterializeResult
(metadata only) and the next one reads the files its upstream wrote.
"""

import json
from collections import Counter
from pathlib import Path

import dagster as dg

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
    plan_corpus,
)
from eval_pipeline.corpus.jsonl import read_jsonl, staged_outputs, write_json, write_jsonl
from eval_pipeline.corpus.sampling import SampleSpec
from eval_pipeline.corpus.tiers import append_tier2_fixtures, select_tiers
from eval_pipeline.corpus.upstream import (
    ResolvedUpstream,
    check_revision,
    check_variant,
    file_sha256,
    resolve_upstream,
)

UPSTREAM_FILE = "upstream.json"
GROUP = "corpus"


def _md_table(header: list[str], rows: list[list[object]]) -> dg.MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def _load_upstream(paths: ProjectPaths) -> ResolvedUpstream:
    return ResolvedUpstream.model_validate_json(
        (paths.corpus_dir() / UPSTREAM_FILE).read_text(encoding="utf-8")
    )


def _load_plan(paths: ProjectPaths) -> CorpusPlan:
    corpus_dir = paths.corpus_dir()
    raw = json.loads((corpus_dir / PLAN_FILE).read_text(encoding="utf-8"))
    goldens = list(read_jsonl(corpus_dir / GOLDENS_FILE))
    return CorpusPlan(
        upstream=ResolvedUpstream.model_validate(raw["upstream"]),
        spec=SampleSpec.model_validate(raw["spec"]),
        goldens=goldens,
        strata=raw["strata"],
        file_stats=raw["file_stats"],
        tiers=raw.get("tiers", "1"),
        light=raw.get("light", False),
        tier2=raw.get("tier2"),
    )


@dg.asset(group_name=GROUP, description="The pinned LongMemEval file, verified by sha256.")
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
    with staged_outputs(paths.corpus_dir(), [UPSTREAM_FILE]) as stage:
        write_json(stage / UPSTREAM_FILE, upstream.model_dump())
    return dg.MaterializeResult(
        metadata={
            "source": upstream.source,
            "file": upstream.file_name,
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
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=[longmemeval_upstream],
    description="Golden JSONL (deepeval Golden shape), sampled by (question_type, abstention).",
)
def goldens(
    context: dg.AssetExecutionContext, paths: ProjectPaths, corpus: CorpusSettings
) -> dg.MaterializeResult:
    tier1, tier2 = corpus.tier_selection()
    plan = plan_corpus(_load_upstream(paths), corpus.sample_spec())
    plan = select_tiers(plan, tier1=tier1, tier2=tier2, light=corpus.light)
    with staged_outputs(paths.corpus_dir(), [GOLDENS_FILE, PLAN_FILE]) as stage:
        write_jsonl(stage / GOLDENS_FILE, plan.goldens)
        write_json(stage / PLAN_FILE, plan.to_json())
    context.log.info(
        f"{len(plan.goldens)} goldens (tiers {plan.tiers}) from "
        f"{plan.file_stats['records']} upstream records"
    )
    evidence = evidence_report(plan.goldens)
    return dg.MaterializeResult(
        metadata={
            "questions": len(plan.goldens),
            "tiers": plan.tiers,
            "tier2_questions": (plan.tier2 or {}).get("questions", 0),
            "abstention": sum(g["additional_metadata"]["abstention"] for g in plan.goldens),
            "sample_spec": dg.MetadataValue.json(plan.spec.model_dump()),
            "strata": _md_table(
                ["stratum", "available", "selected"],
                [[k, v["available"], v["selected"]] for k, v in plan.strata.items()],
            ),
            "without_evidence_unexpected": len(evidence["without_evidence_turns_unexpected"]),
            "path": dg.MetadataValue.path(str(paths.corpus_dir() / GOLDENS_FILE)),
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=[goldens],
    description="Haystack sessions of the sampled questions, deduplicated across the batch.",
)
def session_fixtures(
    context: dg.AssetExecutionContext, paths: ProjectPaths
) -> dg.MaterializeResult:
    plan = _load_plan(paths)
    corpus_dir = paths.corpus_dir()
    with staged_outputs(corpus_dir, [FIXTURES_FILE, MANIFEST_FILE]) as stage:
        stats = build_fixtures(plan, stage / FIXTURES_FILE, spill_dir=stage)
        stats = append_tier2_fixtures(plan, stage / FIXTURES_FILE, stats)
        manifest = manifest_for(plan, stats, file_sha256(corpus_dir / GOLDENS_FILE))
        write_json(stage / MANIFEST_FILE, manifest)
    context.log.info(f"{stats['sessions']} sessions, {stats['turns']} turns")
    return dg.MaterializeResult(
        metadata={
            **{k: v for k, v in stats.items() if k != "sha256"},
            "comparable": manifest["comparable"],
            "fixtures_sha256": stats["sha256"],
            "path": dg.MetadataValue.path(str(corpus_dir / FIXTURES_FILE)),
            "manifest": dg.MetadataValue.path(str(corpus_dir / MANIFEST_FILE)),
        }
    )


# ---- checks -------------------------------------------------------------------------


@dg.asset_check(asset=longmemeval_upstream, blocking=True, description="Exact commit pinned.")
def upstream_revision_pinned(paths: ProjectPaths) -> dg.AssetCheckResult:
    up = _load_upstream(paths)
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
def upstream_sha256_matches(paths: ProjectPaths) -> dg.AssetCheckResult:
    up = _load_upstream(paths)
    actual = file_sha256(up.path)
    return dg.AssetCheckResult(
        passed=actual == up.sha256 and (not up.expected_sha256 or actual == up.expected_sha256),
        metadata={"actual": actual, "expected": up.expected_sha256 or "unpinned"},
    )


@dg.asset_check(asset=longmemeval_upstream, blocking=True, description="Not the oracle variant.")
def upstream_not_oracle(paths: ProjectPaths) -> dg.AssetCheckResult:
    up = _load_upstream(paths)
    try:
        check_variant(up.variant if up.variant != "sample" else "s", up.file_name)
    except ValueError as exc:
        return dg.AssetCheckResult(passed=False, description=str(exc))
    return dg.AssetCheckResult(passed=True, metadata={"variant": up.variant})


@dg.asset_check(asset=goldens, description="Every answerable golden has an evidence turn.")
def goldens_have_evidence(paths: ProjectPaths) -> dg.AssetCheckResult:
    report = evidence_report(list(read_jsonl(paths.corpus_dir() / GOLDENS_FILE)))
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


def missing_haystack_sessions(corpus_dir: Path) -> list[str]:
    """`question_id: session_id` pairs a golden names but the fixtures do not hold."""
    membership: dict[str, set[str]] = {}
    for fx in read_jsonl(corpus_dir / FIXTURES_FILE):
        membership[fx["session_id"]] = set(fx["question_ids"])
    missing = []
    for g in read_jsonl(corpus_dir / GOLDENS_FILE):
        for sid in g["additional_metadata"]["haystack_session_ids"]:
            if g["name"] not in membership.get(sid, ()):
                missing.append(f"{g['name']}: {sid}")
    return missing


@dg.asset_check(asset=session_fixtures, blocking=True, description="Every haystack is present.")
def fixtures_cover_haystacks(paths: ProjectPaths) -> dg.AssetCheckResult:
    missing = missing_haystack_sessions(paths.corpus_dir())
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
