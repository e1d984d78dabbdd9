"""The protocol checks (`score.protocol`) as asset checks on the asset that computed what
they check, and their statuses carried to the manifest.

A check whose failure `fails_run` is blocking (the chain stops at its stage); a
`not_comparable` one fails with ERROR severity but lets the run go on (its bundle is written,
compare refuses it); a `warning` status is a WARN-severity failure. Each stage publishes its
statuses under `facts["protocol"]`; the manifest gathers them from the chain of outputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import dagster as dg

from eval_pipeline.assets.handoff import StageOutput
from eval_pipeline.score.protocol import CHECKS, CheckStatus, merge, read_map

PROTOCOL_FACT = "protocol"


def protocol_spec(name: str, asset: str) -> dg.AssetCheckSpec:
    check = CHECKS[name]
    return dg.AssetCheckSpec(
        name,
        asset=asset,
        blocking=check.effect == "fails_run",
        description=f"{check.description} Failing it: {check.effect.replace('_', ' ')}.",
    )


def protocol_result(name: str, status: CheckStatus) -> dg.AssetCheckResult:
    warns = status.status == "warning" or status.effect == "warns"
    return dg.AssetCheckResult(
        check_name=name,
        passed=status.ok,
        severity=dg.AssetCheckSeverity.WARN if warns else dg.AssetCheckSeverity.ERROR,
        description=status.detail,
        metadata={
            "status": status.status,
            "effect": status.effect,
            "detail": dg.MetadataValue.text(status.detail),
        },
    )


def protocol_results(statuses: dict[str, CheckStatus]) -> Iterable[dg.AssetCheckResult]:
    return (protocol_result(name, s) for name, s in statuses.items())


def stage_protocol(outputs: list[StageOutput], asset: str, labels: list[str]) -> dict[str, Any]:
    """The statuses `asset` published in each of `outputs`' chains, merged across batches
    (the worst status, each batch's detail labelled)."""
    by_name: dict[str, list[tuple[str, CheckStatus]]] = {}
    seen: set[str] = set()
    for output, label in zip(outputs, labels, strict=True):
        found = output.find(asset)
        if found is None or found.dir in seen:  # one corpus output shared by every batch
            continue
        seen.add(found.dir)
        for name, status in read_map(found.facts.get(PROTOCOL_FACT)).items():
            by_name.setdefault(name, []).append((label, status))
    return {name: merge(statuses).model_dump() for name, statuses in by_name.items()}
