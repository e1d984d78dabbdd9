"""A run bundle's manifest, built from the outputs the scored run consumed.

Every pin comes from the chain of `StageOutput`s retrieval handed on (one per question
batch) and from what retrieval read in the graph itself, never from whatever is latest on the
instance. K batches are K graph instances: their graph pins are merged (one fingerprint over
theirs, in batch order) and each batch's own provenance is listed apart.
"""

from __future__ import annotations

import hashlib
import subprocess
from datetime import datetime
from typing import Any

import dagster as dg

from eval_pipeline import __version__, build
from eval_pipeline.assets.batches import ONE_BATCH
from eval_pipeline.assets.graph_lease import GRAPH_STEPS
from eval_pipeline.assets.handoff import StageOutput
from eval_pipeline.assets.protocol import stage_protocol
from eval_pipeline.config import ModelRole, RepeatConfig, ScoringConfig
from eval_pipeline.corpus.batches import BatchKey, partitioning_pin
from eval_pipeline.corpus.convert import GOLDENS_FILE
from eval_pipeline.llm.accounting import merge_usage
from eval_pipeline.score.judge_check import judge_agreement_pins
from eval_pipeline.score.panel import member_pin, parse_panel
from eval_pipeline.score.tokens import PayloadTokenizer
from eval_pipeline.score.verdict_choice import choose_verdict
from eval_pipeline.settings import REPO_DIR
from eval_pipeline.tier2.metrics import criteria_prompt_hash

# The stages a bundle's numbers come from, in chain order.
STAGES = (
    "longmemeval_upstream",
    "goldens",
    "session_fixtures",
    "injected_graph",
    "reconciled_graph",
    "retrieval_results",
)


def code_version() -> str:
    """Package version plus the git commit when running from a checkout."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_DIR), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{__version__}+{commit}" if commit else __version__


def stage_records(
    instance: dg.DagsterInstance, batches: list[StageOutput]
) -> dict[str, dict[str, Any]]:
    """Per stage this run's scores come from: its Dagster run, how long its step took and its
    artifact. With several question batches, each graph stage is listed per batch
    (`injected_graph [batch-01-of-02]`)."""
    out: dict[str, dict[str, Any]] = {}
    for key in STAGES:
        for retrieval in batches if key in GRAPH_STEPS else batches[:1]:
            name = key
            if key in GRAPH_STEPS and len(batches) > 1:
                name = f"{key} [{batch_of_output(retrieval).key}]"
            out[name] = _stage_record(instance, retrieval.find(key), key)
    return out


def _stage_record(
    instance: dg.DagsterInstance, output: StageOutput | None, key: str
) -> dict[str, Any]:
    if output is None:
        return {"materialized": False}
    seconds = None
    stats = instance.get_run_step_stats(output.run_id, step_keys=[key])
    if stats and stats[0].end_time and stats[0].start_time:
        seconds = round(stats[0].end_time - stats[0].start_time, 3)
    return {"run_id": output.run_id, "seconds": seconds, "artifact": output.dir}


def batch_of_output(output: StageOutput) -> BatchKey:
    return BatchKey.model_validate(output.facts.get("batch") or ONE_BATCH.model_dump())


def merged_graph_pins(outputs: list[StageOutput]) -> dict[str, Any]:
    """What the graphs held when retrieval read them: one instance's pins as they are; K
    instances' backend and versions (the same for all, else a list) and one fingerprint over
    theirs, in batch order (each batch's own is in the manifest's `batches`)."""
    graphs = [o.facts.get("graph") or {} for o in outputs]
    if len(graphs) == 1:
        return graphs[0]
    out: dict[str, Any] = {}
    for key in ("backend", "server_version", "schema_version"):
        values = [g.get(key) for g in graphs]
        out[key] = values[0] if len(set(map(str, values))) == 1 else values
    joined = "\n".join(str(g.get("fingerprint")) for g in graphs)
    out["fingerprint"] = "batches:" + hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]
    return out


def merged_memory(outputs: list[StageOutput]) -> dict[str, Any]:
    """The memory census of K instances as one: configurations summed by pins key."""
    memories = [o.facts.get("memory") or {} for o in outputs]
    if len(memories) == 1:
        return memories[0]
    by_key: dict[str, dict[str, Any]] = {}
    for memory in memories:
        for c in memory.get("configurations") or []:
            entry = by_key.setdefault(c["pins_key"], {**c, "done": 0, "failed": 0})
            entry["done"] += c.get("done", 0)
            entry["failed"] += c.get("failed", 0)
    return {
        "configurations": sorted(by_key.values(), key=lambda e: -e["done"]),
        "pending": sum(m.get("pending", 0) for m in memories),
        "sessions": sum(m.get("sessions", 0) for m in memories),
        **({"provider": memories[0]["provider"]} if memories[0].get("provider") else {}),
    }


def batch_provenance(outputs: list[StageOutput]) -> list[dict[str, Any]]:
    """Per batch: its instance, what it held, its questions, and the runs that made it."""
    out = []
    for output in outputs:
        steps = {key: output.find(key) for key in GRAPH_STEPS}
        injected = steps["injected_graph"]
        out.append(
            {
                "batch": batch_of_output(output).key,
                "graph": output.facts.get("graph"),
                "questions": output.facts.get("questions"),
                "sessions": (injected.facts.get("counts") or {}).get("sessions")
                if injected
                else None,
                "runs": {k: s.run_id if s else None for k, s in steps.items()},
                "seconds": {k: s.facts.get("seconds") if s else None for k, s in steps.items()},
            }
        )
    return out


def memory_pins(memory: dict[str, Any]) -> dict[str, Any] | None:
    """The reconciler pins of the memory the graph held when retrieval read it: one
    configuration's pins, or `{"mixed": ...}` when sessions came from several (or none)."""
    configs = memory.get("configurations") or []
    if len(configs) == 1 and configs[0].get("pins") is not None and not memory.get("pending"):
        c = configs[0]
        return {**c["pins"], "pins_key": c["pins_key"], "sessions_failed": c["failed"]}
    if not configs:
        return None
    return {
        "mixed": [
            {
                "pins_key": c["pins_key"],
                "name": (c.get("pins") or {}).get("name"),
                "done": c["done"],
                "failed": c["failed"],
            }
            for c in configs
        ],
        "pending": memory.get("pending", 0),
    }


def repeat_record(repeat: RepeatConfig) -> dict[str, Any] | None:
    """`manifest["repeat"]`: which sample of a repeated configuration this run is."""
    if repeat.sample_identity is None:
        return None
    return {
        "index": repeat.index,
        "of": repeat.count,
        "salt": repeat.salt,
        "sample_identity": repeat.sample_identity,
        "includes_reconcile": repeat.reconcile,
    }


def options_of(batches: list[StageOutput], own: dict[str, Any]) -> dict[str, Any]:
    """The options each stage ran with, as it recorded them (`facts["options"]`), plus the
    scored run's own: the configuration this bundle measured, section by section."""
    out: dict[str, Any] = {}
    for key in STAGES:
        found = batches[0].find(key)
        out.update((found.facts.get("options") or {}) if found else {})
    return {**out, **own}


def verdict_record(scoring: ScoringConfig, method: Any, judged: bool) -> dict[str, Any] | None:
    """`pins.judge.verdict`: the verdict method that decided and how it was chosen (`score.
    verdict_choice`); None for a plug-in judge, or when nothing was judged."""
    used = getattr(method, "verdict", None)
    if not judged or not isinstance(used, str):
        return None
    choice = scoring.verdict_choice()
    if choice.method != used:  # the judge's own options named another: that was asked for
        choice = choose_verdict(used, with_model=choice.with_model)
    return choice.record()


def panel_pins(scoring: ScoringConfig) -> list[dict[str, Any]] | None:
    """The judge panel, member by member: its method and hash, its model's role pins. Not a
    comparability pin: compare shows the panel's band only when both runs' are equal."""
    members = parse_panel(scoring.judge_panel, scoring.verdict)
    return [
        member_pin(m, build.role_pins("judge", ModelRole(model=m.model)) if m.model else None)
        for m in members
    ] or None


def protocol_map(batches: list[StageOutput]) -> dict[str, Any]:
    """Every protocol check's status the chain's stages published (`score.protocol`), in
    chain order, merged across batches; scored_run adds its own."""
    labels = [batch_of_output(o).key for o in batches]
    out: dict[str, Any] = {}
    for key in STAGES:
        out.update(stage_protocol(batches, key, labels))
    return out


def build_manifest(
    corpus_manifest: dict,
    batches: list[StageOutput],
    stages: dict,
    scoring: ScoringConfig,
    repeat: RepeatConfig,
    tokenizer: PayloadTokenizer,
    judge_usage: Any,
    started: datetime,
    ended: datetime,
    *,
    panel_usage: Any = None,
) -> dict[str, Any]:
    retrieval_pins = batches[0].facts.get("pins", {})
    memory = merged_memory(batches)
    reconciled = [o.find("reconciled_graph") for o in batches]
    method = build.answer_judge(scoring)
    # Judged: a judge model, or a verdict method that needs none (`match`).
    judged = not scoring.judge.offline or getattr(method, "judge_offline", None) is not None
    panel = panel_pins(scoring)
    return {
        "pins": {
            "corpus": {
                "upstream": corpus_manifest["upstream"],
                "sample_spec": corpus_manifest["sample_spec"],
                "subsampled": not corpus_manifest["comparable"],
                "tiers": corpus_manifest.get("tiers", "1"),
                "light": corpus_manifest.get("light", False),
                "tier2_digest": (corpus_manifest.get("tier2") or {}).get("corpus_digest"),
                # The planted canary set (version, digest, distractors): not a comparability
                # pin, since canaries are scored apart and never change a tier's score.
                **(
                    {"canaries": corpus_manifest["canaries"]}
                    if corpus_manifest.get("canaries")
                    else {}
                ),
                "goldens_sha256": corpus_manifest["files"][GOLDENS_FILE],
                "fixtures_sha256": corpus_manifest["files"]["fixtures.jsonl"],
            },
            # What the graph held when retrieval read it, read from the graph itself.
            "graph": {
                k: merged_graph_pins(batches).get(k)
                for k in ("backend", "server_version", "schema_version", "fingerprint")
            },
            # How the questions were split across graph instances (one batch: one instance).
            "partitioning": partitioning_pin(len(batches)),
            "reconciler": memory_pins(memory),
            "retriever": retrieval_pins.get("retriever"),
            "scope": retrieval_pins.get("scope"),
            "top_k": retrieval_pins.get("top_k"),
            "reader": retrieval_pins.get("reader"),
            # What the reader answers from a context besides its model: its rules' version,
            # its prompt and the prompt's hash (None: a retrieval from before this pin).
            "reader_prompt": retrieval_pins.get("reader_prompt"),
            "judge": {
                "model": scoring.judge.model,
                # The answer judge's own prompts (the built-in's: LongMemEval's protocol); a
                # plug-in judge's hash differs, so runs judged another way never compare.
                "prompt_hash": method.prompt_hash() if judged else None,
                # The tier-2 criteria judge runs only with a judge model.
                "criteria_prompt_hash": (
                    criteria_prompt_hash() if not scoring.judge.offline else None
                ),
                # The invariant judge's pin, and the stored judge-check of each prompt.
                **judge_agreement_pins(
                    scoring.judge.model,
                    method.prompt_hash() if judged else None,
                    needs_model=getattr(method, "judge_offline", None) is None,
                ),
                # The judge role's own pins: for `local`, the weights' sha256, the server's
                # version and its sampling settings (the spec alone does not name the weights).
                "role": build.role_pins("judge", scoring.judge),
                **({"method": method.pins()} if judged else {}),
                "verdict": verdict_record(scoring, method, judged),
                **({"panel": panel} if panel else {}),
            },
            # Reader and graph-agent roles as retrieval ran them (weights sha256 for `local`).
            "llm_roles": {
                name: role
                for name, role in ((retrieval_pins.get("llm") or {}).items())
                if isinstance(role, dict) and role.get("provider") != "offline"
            },
            "gate": {"evidence_recall": f"recall_all@{scoring.gate_k}"},
            # The dataset errata as the goldens stage applied them (docs/errata.md).
            "errata": (batches[0].find("goldens") or batches[0]).facts.get("errata"),
            "tokenizer": tokenizer.pin(),
            "code_version": code_version(),
        },
        "comparable": corpus_manifest["comparable"],
        # The protocol checks' statuses (score.protocol): a failed one that fails the run or
        # makes it not comparable refuses every comparison (runs.protocol).
        "protocol": protocol_map(batches),
        "repeat": repeat_record(repeat),
        "memory": memory,
        "llm_usage": {
            "retrieval": merge_usage([o.facts.get("llm_usage") for o in batches]),
            "reconcile": merge_usage([o.facts.get("llm_usage") if o else None for o in reconciled]),
            "judge": judge_usage,
            # Each panel model's accounting, by model (a panel without models: none).
            **({"judge_panel": panel_usage} if panel_usage else {}),
        },
        # Per batch: its graph instance, what it held, its questions and its runs.
        "batches": batch_provenance(batches),
        "stages": stages,
        "options": options_of(
            batches, {"scoring": scoring.model_dump(), "repeat": repeat.model_dump()}
        ),
        "started_at": started.isoformat(),
        "ended_at": ended.isoformat(),
    }
