"""`eval-pipeline judge-check --json`: the check's figures as one document.

Per verdict method its agreement result exactly as `methods/<method>/agreement.json` holds
it (kappa and accuracy with their intervals, the confusion, the probes), the invariant
judge's when it was checked, where everything was written and stored, and for a published
run its notes (question set, label model, questions left out).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from eval_pipeline.score.agreement import AgreementResult
from eval_pipeline.score.judge_check import JudgeCheckOutcome

OUTPUT_VERSION = 1


class MethodFigures(BaseModel):
    method: str
    labels: str  # "project" (cross-validated on the shipped set) or "labels" (a --labels file)
    evaluation: str
    verdicts: str  # verdicts.jsonl
    agreement: str  # agreement.json
    result: AgreementResult


class JudgeCheckOutput(BaseModel):
    command: Literal["judge-check"] = "judge-check"
    output_version: int = OUTPUT_VERSION
    outcome: Literal["checked"] = "checked"
    exit_code: int = 0
    out_dir: str
    wall_s: float
    methods: list[MethodFigures]
    invariant: AgreementResult | None  # tier 2's invariant judge; None: not checked
    stored: list[str]  # the results kept for manifests, compare and reports
    usage: dict[str, Any] | None  # LLM accounting; None: no model was called
    # What the labelled input held and what was filled in (a published run's question set,
    # the judge model its labels name, questions left out, items left untyped).
    notes: list[str] = []
    # The labels are a published run's: each method's result.confusion has the run's accuracy
    # by the file's labels (label_yes_rate) and by that method (judge_yes_rate).
    published: bool = False


def judge_check_output(outcome: JudgeCheckOutcome) -> JudgeCheckOutput:
    return JudgeCheckOutput(
        out_dir=str(outcome.out_dir),
        wall_s=round(outcome.wall_s, 3),
        methods=[
            MethodFigures(
                method=m.method,
                labels=m.labels,
                evaluation=m.evaluation,
                verdicts=str(m.files.verdicts),
                agreement=str(m.files.agreement),
                result=m.files.result,
            )
            for m in outcome.methods
        ],
        invariant=outcome.invariant.result if outcome.invariant is not None else None,
        stored=[str(p) for p in outcome.stored],
        usage=outcome.usage,
        notes=outcome.notes,
        published=outcome.published,
    )
