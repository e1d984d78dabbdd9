"""Corpus stage assets: longmemeval_upstream → goldens → session_fixtures.

Each writes its files into its artifact (`handoff.publish`) and hands the next one a
`StageOutput`; the checks are the asset's own (computed in its step, on what it just wrote).
"""

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.assets import GROUP
from eval_pipeline.assets.failure_log import records_failures
from eval_pipeline.assets.handoff import StageOutput, prune_artifacts, publish
from eval_pipeline.assets.protocol import PROTOCOL_FACT, protocol_result, protocol_spec
from eval_pipeline.assets.resources import CorpusResource, PathsResource
from eval_pipeline.corpus.canaries import (
    CANARIES_FILE,
    CANARY_SET_FILE,
    canary_goldens,
    canary_pin,
    load_canaries,
    plant_fixtures,
    refuse_reserved_ids,
)
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
    repeated_sessions_report,
)
from eval_pipeline.corpus.errata_apply import ERRATA_FILE, errata_applier
from eval_pipeline.corpus.jsonl import read_jsonl, write_json, write_jsonl
from eval_pipeline.corpus.tiers import append_tier2_fixtures, select_tiers
from eval_pipeline.corpus.upstream import (
    ResolvedUpstream,
    check_revision,
    check_variant,
    file_sha256,
    resolve_upstream,
)
from eval_pipeline.runs.markdown import md_row
from eval_pipeline.score import protocol

UPSTREAM_FILE = "upstream.json"


def md_table(header: list[str], rows: list[list[object]]) -> dg.MetadataValue:
    """A markdown table for asset metadata: one line per row, each cell escaped (`md_cell`)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += [md_row(row) for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def load_upstream(output: StageOutput) -> ResolvedUpstream:
    return ResolvedUpstream.model_validate_json(output.file(UPSTREAM_FILE).read_text("utf-8"))


def plan_canaries(goldens: list[dict]) -> tuple[Any, list[dict]]:
    """The bundled canary set and its question rows for this sample (`corpus.canaries`)."""
    refuse_reserved_ids(goldens)
    canaries = load_canaries()
    return canaries, canary_goldens(canaries, goldens)


def load_plan(output: StageOutput) -> CorpusPlan:
    """The corpus plan a `goldens` output holds (its plan.json and goldens.jsonl)."""
    raw = json.loads(output.file(PLAN_FILE).read_text(encoding="utf-8"))
    return CorpusPlan.from_json(raw, list(read_jsonl(output.file(GOLDENS_FILE))))


UPSTREAM_CHECKS = [
    dg.AssetCheckSpec(
        "upstream_revision_pinned",
        asset="longmemeval_upstream",
        blocking=True,
        description="Exact commit pinned (a local file: its sha256).",
    ),
    dg.AssetCheckSpec(
        "upstream_sha256_matches",
        asset="longmemeval_upstream",
        blocking=True,
        description="File matches its pin.",
    ),
    dg.AssetCheckSpec(
        "upstream_not_oracle",
        asset="longmemeval_upstream",
        blocking=True,
        description="Not the oracle variant, by label and by content (some haystack holds a "
        "distractor session).",
    ),
]


def upstream_checks(up: ResolvedUpstream) -> Iterator[dg.AssetCheckResult]:
    if up.source == "huggingface":
        try:
            check_revision(up.revision or "")
            yield dg.AssetCheckResult(
                check_name="upstream_revision_pinned",
                passed=True,
                metadata={"revision": up.revision},
            )
        except ValueError as exc:
            yield dg.AssetCheckResult(
                check_name="upstream_revision_pinned", passed=False, description=str(exc)
            )
    else:  # files outside the hub have no revision; their pin is the sha256
        yield dg.AssetCheckResult(
            check_name="upstream_revision_pinned",
            passed=up.pinned,
            severity=dg.AssetCheckSeverity.WARN,
            description=None if up.pinned else "local file with no sha256 pin: recorded by digest",
            metadata={"source": up.source, "sha256": up.sha256},
        )
    yield dg.AssetCheckResult(
        check_name="upstream_sha256_matches",
        passed=not up.expected_sha256 or up.sha256 == up.expected_sha256,
        metadata={"actual": up.sha256, "expected": up.expected_sha256 or "unpinned"},
    )
    oracle = None
    try:
        check_variant(up.variant)
    except ValueError as exc:
        oracle = str(exc)
    if oracle is None and oracle_by_content(up.path):
        oracle = (
            "no haystack holds a distractor session: this is the oracle variant by content, "
            "whatever its name"
        )
    yield dg.AssetCheckResult(
        check_name="upstream_not_oracle",
        passed=oracle is None,
        description=oracle,
        metadata={"variant": up.variant},
    )


@dg.asset(
    group_name=GROUP,
    description="The pinned LongMemEval file, verified by sha256.",
    check_specs=UPSTREAM_CHECKS,
)
@records_failures
def longmemeval_upstream(
    context: dg.AssetExecutionContext, paths: PathsResource, corpus: CorpusResource
) -> Iterator[Any]:
    upstream = resolve_upstream(corpus.upstream_spec(), verify=True)
    by_type: Counter[str] = Counter()
    abstention = 0
    for q in iter_questions(upstream.path):
        by_type[q.question_type] += 1
        abstention += q.abstention
    records = sum(by_type.values())
    context.log.info(f"upstream {upstream.file_name}: {records} records")
    # A new corpus is where old run artifacts are let go of (the latest ones are kept).
    prune_artifacts(paths.root())
    with publish(context, paths.root()) as pub:
        write_json(pub.stage / UPSTREAM_FILE, upstream.model_dump())
        pub.facts.update(upstream=upstream.model_dump(), records=records)
    yield dg.Output(
        pub.output,
        metadata={
            "source": upstream.source,
            "file": upstream.file_name,
            "variant": upstream.variant,
            "revision": upstream.revision or "none (not a Hugging Face source)",
            "sha256": upstream.sha256,
            "sha256_pinned": upstream.pinned,
            "bytes": upstream.bytes,
            "records": records,
            "abstention": abstention,
            "by_question_type": md_table(
                ["question_type", "records"], [[t, n] for t, n in sorted(by_type.items())]
            ),
            "path": dg.MetadataValue.path(upstream.path),
            "artifact_dir": dg.MetadataValue.path(str(pub.final)),
        },
    )
    yield from upstream_checks(upstream)


@dg.asset(
    group_name=GROUP,
    description="Golden JSONL (deepeval Golden shape), sampled by (question_type, abstention).",
    check_specs=[
        dg.AssetCheckSpec(
            "goldens_have_evidence",
            asset="goldens",
            description="Every answerable golden has an evidence turn.",
        ),
        protocol_spec(protocol.REPEATED_SESSIONS, "goldens"),
    ],
)
@records_failures
def goldens(
    context: dg.AssetExecutionContext,
    paths: PathsResource,
    corpus: CorpusResource,
    longmemeval_upstream: StageOutput,
) -> Iterator[Any]:
    tier1, tier2 = corpus.tier_selection()
    upstream = load_upstream(longmemeval_upstream)
    # Dataset errata of exactly this file: flags, or suspect questions left out of the sample.
    errata = errata_applier(
        upstream.sha256, mode=corpus.errata, errata_file=corpus.errata_file, tier1=tier1
    )
    plan = plan_corpus(upstream, corpus.sample_spec(), exclude=errata)
    plan = select_tiers(plan, tier1=tier1, tier2=tier2, light=corpus.light)
    applied = errata.record(plan.goldens)
    repeats = protocol.repeated_sessions_check(repeated_sessions_report(plan))
    planted = plan_canaries(plan.goldens) if corpus.canaries else None
    with publish(context, paths.root(), {"longmemeval_upstream": longmemeval_upstream}) as pub:
        write_jsonl(pub.stage / GOLDENS_FILE, plan.goldens)
        write_json(pub.stage / PLAN_FILE, plan.to_json())
        write_json(pub.stage / ERRATA_FILE, applied)
        if planted is not None:
            # Apart from goldens.jsonl: the question set, sampling and deepeval are unchanged.
            write_jsonl(pub.stage / CANARIES_FILE, planted[1])
            # The set itself travels with its questions: the fixtures stage plants this copy.
            shutil.copyfile(CANARY_SET_FILE, pub.stage / CANARY_SET_FILE.name)
            pub.facts["canaries"] = canary_pin(*planted)
        pub.facts.update(
            questions=len(plan.goldens),
            goldens_sha256=file_sha256(pub.stage / GOLDENS_FILE),
            sample_spec=plan.spec.model_dump(),
            tiers=plan.tiers,
            options={"corpus": corpus.model_dump()},
            errata=applied["pin"],
            **{PROTOCOL_FACT: protocol.as_map({protocol.REPEATED_SESSIONS: repeats})},
        )
    if applied["pin"].get("not_in_file"):
        context.log.warning(
            f"errata name questions not in the file: {applied['pin']['not_in_file']}"
        )
    context.log.info(
        f"{len(plan.goldens)} goldens (tiers {plan.tiers}) from "
        f"{plan.file_stats['records']} upstream records"
    )
    if plan.sample_note:
        context.log.warning(f"note: {plan.sample_note}")
    evidence = evidence_report(plan.goldens)
    yield dg.Output(
        pub.output,
        metadata={
            "questions": len(plan.goldens),
            "tiers": plan.tiers,
            "tier2_questions": (plan.tier2 or {}).get("questions", 0),
            "canaries": len(planted[1]) if planted else 0,
            "abstention": sum(g["additional_metadata"]["abstention"] for g in plan.goldens),
            "sample_spec": dg.MetadataValue.json(plan.spec.model_dump()),
            "sample_requested": plan.requested_sample,
            "sample_note": dg.MetadataValue.text(plan.sample_note or ""),
            "strata": md_table(
                ["stratum", "available", "selected"],
                [[k, v["available"], v["selected"]] for k, v in plan.strata.items()],
            ),
            "without_evidence_unexpected": len(evidence["without_evidence_turns_unexpected"]),
            "errata": dg.MetadataValue.json(applied["pin"]),
            "path": dg.MetadataValue.path(str(pub.final / GOLDENS_FILE)),
            "artifact_dir": dg.MetadataValue.path(str(pub.final)),
        },
    )
    unexpected = evidence["without_evidence_turns_unexpected"]
    yield dg.AssetCheckResult(
        check_name="goldens_have_evidence",
        passed=not unexpected,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "unexpected_without_evidence": dg.MetadataValue.json(unexpected),
            "abstention_without_evidence": dg.MetadataValue.json(
                evidence["without_evidence_turns_abstention"]
            ),
            "assistant_side_evidence_only": dg.MetadataValue.json(
                evidence["assistant_side_evidence_only"]
            ),
        },
    )
    yield protocol_result(protocol.REPEATED_SESSIONS, repeats)


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


@dg.asset(
    group_name=GROUP,
    description="Haystack sessions of the sampled questions, deduplicated across the batch.",
    check_specs=[
        dg.AssetCheckSpec(
            "fixtures_cover_haystacks",
            asset="session_fixtures",
            blocking=True,
            description="Every haystack is present.",
        )
    ],
)
@records_failures
def session_fixtures(
    context: dg.AssetExecutionContext, paths: PathsResource, goldens: StageOutput
) -> Iterator[Any]:
    plan = load_plan(goldens)
    with publish(context, paths.root(), {"goldens": goldens}) as pub:
        spill = pub.stage / ".spill"
        spill.mkdir()
        stats = build_fixtures(plan, pub.stage / FIXTURES_FILE, spill_dir=spill)
        stats = append_tier2_fixtures(plan, pub.stage / FIXTURES_FILE, stats)
        canaries = goldens.file(CANARIES_FILE)
        if canaries.exists():
            planted = load_canaries(goldens.file(CANARY_SET_FILE.name))
            stats = plant_fixtures(
                pub.stage / FIXTURES_FILE, planted, list(read_jsonl(canaries)), stats
            )
        manifest = manifest_for(plan, stats, goldens.facts["goldens_sha256"])
        if canaries.exists():
            manifest["canaries"] = goldens.facts["canaries"]
        write_json(pub.stage / MANIFEST_FILE, manifest)
        shutil.rmtree(spill, ignore_errors=True)
        missing = missing_haystack_sessions(goldens.file(GOLDENS_FILE), pub.stage / FIXTURES_FILE)
        if canaries.exists():
            missing += missing_haystack_sessions(canaries, pub.stage / FIXTURES_FILE)
        pub.facts.update(
            fixtures_sha256=stats["sha256"],
            goldens_sha256=goldens.facts["goldens_sha256"],
            sessions=stats["sessions"],
            turns=stats["turns"],
            comparable=manifest["comparable"],
        )
    context.log.info(f"{stats['sessions']} sessions, {stats['turns']} turns")
    yield dg.Output(
        pub.output,
        metadata={
            **{k: v for k, v in stats.items() if k != "sha256"},
            "comparable": manifest["comparable"],
            "fixtures_sha256": stats["sha256"],
            "path": dg.MetadataValue.path(str(pub.final / FIXTURES_FILE)),
            "manifest": dg.MetadataValue.path(str(pub.final / MANIFEST_FILE)),
            "artifact_dir": dg.MetadataValue.path(str(pub.final)),
        },
    )
    yield dg.AssetCheckResult(
        check_name="fixtures_cover_haystacks",
        passed=not missing,
        metadata={"missing": len(missing), "first_missing": dg.MetadataValue.json(missing[:20])},
    )


CORPUS_ASSETS = [longmemeval_upstream, goldens, session_fixtures]
