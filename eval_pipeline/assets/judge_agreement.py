"""`judge_agreement`: the configured judge's agreement with the labelled set, in the UI.

It stands beside the chain, not in it (it is not in the chain's asset group): it reads
no stage's output, touches no graph, and a scored run needs no check to be valid; a run
records whatever check exists when it is scored. By default it reads the `AgreementStore`
for the judge the `scoring` resource names (the same key a manifest pins: judge spec and
prompt hash) and publishes kappa, accuracy, intervals, probe deltas and warnings as
metadata; with `run_check: true` it first runs the check itself (`score.judge_check`, what
`eval-pipeline judge-check` runs: minutes of model calls for a local model).
"""

from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline import build
from eval_pipeline.assets import GROUP
from eval_pipeline.assets.failure_log import records_failures
from eval_pipeline.assets.resources import ScoringResource
from eval_pipeline.score.agreement import (
    AgreementResult,
    AgreementStore,
    agreement_warnings,
    lookup_agreement,
)
from eval_pipeline.score.judge_check import (
    JudgeCheckError,
    agreement_line,
    run_judge_check,
)
from eval_pipeline.score.judges import prompt_hash
from eval_pipeline.tier2.invariant_judge import invariant_prompt_hash


class JudgeAgreementConfig(dg.Config):
    run_check: bool = Field(
        default=False,
        description="run the judge over the labelled set first (slow: one call per item)",
    )
    labels: str | None = Field(default=None, description="label file (default: corpus/judge)")
    out: str | None = Field(default=None, description="where the check writes its files")


def _metadata(kind: str, result: AgreementResult | None) -> dict[str, Any]:
    prefix = "" if kind == "answer_judge" else "invariant_"
    if result is None:
        return {f"{prefix}status": "no check"}
    out: dict[str, Any] = {
        f"{prefix}status": "checked",
        f"{prefix}kappa": result.kappa.estimate,
        f"{prefix}kappa_low": result.kappa.low,
        f"{prefix}kappa_high": result.kappa.high,
        f"{prefix}accuracy": result.accuracy.estimate,
        f"{prefix}n_judged": result.n_judged,
        f"{prefix}n_unscored": result.n_unscored,
        f"{prefix}measured_at": result.measured_at,
        f"{prefix}line": agreement_line(result),
    }
    if result.probes is not None:
        for name, probe in result.probes.results.items():
            out[f"probe_{name}_delta"] = probe.delta
    return out


def judge_agreement_metadata(
    judge: str, store: AgreementStore, answer_hash: str | None = None, *, needs_model: bool = True
) -> dict[str, Any]:
    """Plain metadata for `judge` from the store (None values for what was not measured):
    the answer verdict's check under `answer_hash` (default: the reference prompt's)."""
    answer_hash = answer_hash or prompt_hash()
    answer = lookup_agreement(judge if needs_model else "none", answer_hash, root=store.root)
    inv = lookup_agreement(judge, invariant_prompt_hash(), root=store.root)
    warnings = [f"answer_judge: {w}" for w in agreement_warnings(answer)]
    warnings += [f"invariant_judge: {w}" for w in agreement_warnings(inv)]
    return {
        "judge": judge,
        "prompt_hash": answer_hash,
        "invariant_prompt_hash": invariant_prompt_hash(),
        **_metadata("answer_judge", answer),
        **_metadata("invariant_judge", inv),
        "warnings": "\n".join(warnings) or "none",
        "store": str(store.root),
    }


@dg.asset(
    group_name=GROUP,
    description="The configured judge's agreement with the labelled judge set (kappa, "
    "accuracy, bias probes), from the store `eval-pipeline judge-check` fills.",
)
@records_failures
def judge_agreement(
    context: dg.AssetExecutionContext, config: JudgeAgreementConfig, scoring: ScoringResource
) -> dg.MaterializeResult:
    judge = scoring.judge.model
    store = AgreementStore()
    method = build.answer_judge(scoring)
    needs_model = getattr(method, "judge_offline", None) is None
    if judge == "offline" and needs_model:
        context.log.info("no judge configured (offline): nothing judged, nothing to check")
        return dg.MaterializeResult(metadata={"judge": "offline", "status": "no judge"})
    if config.run_check:
        try:
            outcome = run_judge_check(
                judge, labels=config.labels, out_dir=config.out, store=store, progress_stream=None
            )
        except JudgeCheckError as exc:
            raise dg.Failure(description=str(exc)) from None
        context.log.info(f"judge-check written to {outcome.out_dir}")
    metadata = judge_agreement_metadata(judge, store, method.prompt_hash(), needs_model=needs_model)
    for line in metadata["warnings"].splitlines():
        context.log.warning(line)
    return dg.MaterializeResult(
        metadata={k: v for k, v in metadata.items() if v is not None},
    )


JUDGE_AGREEMENT_ASSETS = [judge_agreement]
