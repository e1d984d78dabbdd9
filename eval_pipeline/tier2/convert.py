"""Tier-2 scenarios → goldens rows and session fixtures, in exactly the tier-1 shapes.

Injection representation (documented in corpus/tier2/README.md):
- one source event = one session; `session_id` = the event id;
- one message of the event = one turn, `index` = its position in the event;
- `role` = the event's source kind (`pull_request`, `issue`, `chat_thread`, `deploy`,
  `alert`, `doc`): where a fact was recorded is part of organisational memory, and a
  retriever that prints roles shows it to the reader;
- `content` = `"<author>: <text>"`, the event title on its own line before the first turn;
- `date` = the event timestamp in upstream form, `started_at` = the same in ISO 8601.

Because no tier-2 turn has the role `user`, tier-1's `upstream` retrieval variant (user turns
only) excludes every tier-2 question with the reason "no user-role evidence turn"; the `all`
variant and the evidence-recall gate (which reads `all`) score them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from eval_pipeline.corpus.models import turn_id
from eval_pipeline.tier2.load import (
    TIER2_DIR,
    corpus_digest,
    corpus_issues,
    load_scenarios,
    load_universe,
)
from eval_pipeline.tier2.schema import (
    Event,
    Question,
    Scenario,
    Universe,
    parse_duration,
    question_evidence,
    question_must_cite,
)
from eval_pipeline.tier2.turns import render_turns

TIER = 2
QUESTION_ID_PREFIX = "t2-"
ABSTENTION_SUFFIX = "_abs"  # the tier-1 convention: abstention is marked on the id
DEFAULT_ASK_AFTER = "1d"
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # locale-independent


class Tier2CorpusError(ValueError):
    """The tier-2 corpus breaks a corpus-wide rule (see `load.corpus_issues`)."""


def upstream_date(value: datetime) -> str:
    """`datetime(2024, 3, 5, 10, 12)` → `"2024/03/05 (Tue) 10:12"` (LongMemEval's form)."""
    return f"{value:%Y/%m/%d} ({_WEEKDAYS[value.weekday()]}) {value:%H:%M}"


def question_type(scenario: Scenario) -> str:
    """`tier2-<use case>`: never one of tier 1's types, so per-type panels never mix."""
    return f"tier2-{scenario.use_case.lower()}"


def question_id(scenario: Scenario, index: int) -> str:
    q = scenario.questions[index]
    return (
        f"{QUESTION_ID_PREFIX}{scenario.id}-q{index + 1}{ABSTENTION_SUFFIX if q.abstention else ''}"
    )


def haystack_order(scenario: Scenario, universe: Universe) -> list[str]:
    """Arrival order: the authored `arrival` when given (out-of-order scenarios), else event
    time, ties by id, so the order never depends on how the YAML happens to list them."""
    if scenario.arrival is not None:
        return list(scenario.arrival)
    return sorted(scenario.haystack_ids, key=lambda e: (universe[e].timestamp, e))


def asked_at(scenario: Scenario, question: Question, universe: Universe) -> datetime:
    if question.asked_at is not None:
        return question.asked_at
    latest = max(universe[e].timestamp for e in scenario.haystack_ids)
    return latest + parse_duration(question.ask_after or DEFAULT_ASK_AFTER)


def _evidence_turns(scenario: Scenario, question: Question, universe: Universe) -> list[tuple]:
    """(turn id, role, content, session id) of every evidence turn, in signal order."""
    out = []
    for ref in question_evidence(scenario, question):
        event = universe[ref.event]
        turns = render_turns(event)
        for i in ref.turns if ref.turns is not None else range(len(turns)):
            out.append((turn_id(event.id, i), event.source, turns[i]["content"], event.id))
    return out


def golden_rows(
    scenario: Scenario, universe: Universe, source_file: str | None = None
) -> list[dict[str, Any]]:
    """One goldens.jsonl row per question: tier-1 keys plus tier-2 metadata."""
    haystack = haystack_order(scenario, universe)
    rows = []
    for n, q in enumerate(scenario.questions):
        evidence = _evidence_turns(scenario, q, universe)
        rows.append(
            {
                "input": q.ask.strip(),
                "expected_output": q.expected.strip(),
                "context": [content for _, _, content, _ in evidence],
                "name": question_id(scenario, n),
                "source_file": source_file or scenario.source_file,
                "additional_metadata": {
                    # tier-1 keys, same meaning
                    "tier": TIER,
                    "question_type": question_type(scenario),
                    "question_date": upstream_date(asked_at(scenario, q, universe)),
                    "abstention": q.abstention,
                    "evidence_turn_ids": [t for t, _, _, _ in evidence],
                    "evidence_turn_roles": [r for _, r, _, _ in evidence],
                    "evidence_session_ids": list(dict.fromkeys(s for _, _, _, s in evidence)),
                    "haystack_session_ids": haystack,
                    "upstream_haystack_size": len(haystack),  # never subsampled in tier 2
                    # tier-2 keys
                    "scenario_id": scenario.id,
                    "use_case": scenario.use_case,
                    "difficulty": scenario.difficulty,
                    "adversarial": list(scenario.adversarial),
                    "source_mix": sorted(scenario.source_mix),
                    "dimensions": list(scenario.dimensions),
                    "must_cite": question_must_cite(scenario, q),
                    "must_not_cite": list(scenario.must_not_cite),
                    "criteria": [c.model_dump() for c in scenario.criteria],
                    "light": scenario.light,
                    # the ingestion axis and pass criteria (tier2.ingestion, pass_criteria)
                    "expected_entities": list(scenario.expected_entities),
                    "expected_claims": [c.model_dump() for c in scenario.expected_claims],
                    "forbidden_claims": [c.model_dump() for c in scenario.forbidden_claims],
                    "pass_score": scenario.pass_score,
                },
            }
        )
    return rows


@dataclass
class _Fixture:
    event: Event
    question_ids: list[str] = field(default_factory=list)
    holds_evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        # Key order as tier 1's FixtureWriter writes it.
        return {
            "session_id": self.event.id,
            "date": upstream_date(self.event.timestamp),
            "started_at": self.event.timestamp.isoformat(),
            "turns": render_turns(self.event),
            "question_ids": list(self.question_ids),
            "holds_evidence": list(self.holds_evidence),
        }


@dataclass
class Tier2Corpus:
    goldens: list[dict[str, Any]]
    fixtures: list[dict[str, Any]]
    stats: dict[str, Any]


def build_tier2(
    scenarios: list[Scenario], universe: Universe, *, digest: str | None = None
) -> Tier2Corpus:
    """Goldens for every question, and one fixture per event used by any of them.

    Like tier 1, a session shared by several questions is written once and lists every
    question whose haystack holds it (batch order); `holds_evidence` lists those for which
    it is evidence. Only events some scenario uses are injected.
    """
    goldens: list[dict[str, Any]] = []
    fixtures: dict[str, _Fixture] = {}
    for scenario in scenarios:
        source = scenario.source_file + (f"@sha256:{digest[:16]}" if digest else "")
        for row in golden_rows(scenario, universe, source):
            goldens.append(row)
            meta = row["additional_metadata"]
            evidence = set(meta["evidence_session_ids"])
            for sid in meta["haystack_session_ids"]:
                fx = fixtures.setdefault(sid, _Fixture(universe[sid]))
                fx.question_ids.append(row["name"])
                if sid in evidence:
                    fx.holds_evidence.append(row["name"])
    lines = [fx.to_dict() for fx in fixtures.values()]
    by_cell = Counter(f"{s.use_case}/{s.difficulty}" for s in scenarios)
    stats = {
        "tier": TIER,
        "scenarios": len(scenarios),
        "questions": len(goldens),
        "abstention": sum(1 for g in goldens if g["additional_metadata"]["abstention"]),
        "sessions": len(lines),
        "turns": sum(len(fx["turns"]) for fx in lines),
        "haystack_slots": sum(
            len(g["additional_metadata"]["haystack_session_ids"]) for g in goldens
        ),
        "by_use_case_difficulty": dict(sorted(by_cell.items())),
        "corpus_digest": digest,
    }
    return Tier2Corpus(goldens, lines, stats)


def load_tier2(light_only: bool = False, *, root: str | Path | None = None) -> Tier2Corpus:
    """Load, enforce the corpus-wide rules and build; raises on any problem."""
    root = Path(root) if root is not None else TIER2_DIR
    universe = load_universe(root)
    everything = load_scenarios(root=root, universe=universe)
    problems = corpus_issues(everything)
    if problems:
        raise Tier2CorpusError("tier-2 corpus rules broken:\n  " + "\n  ".join(problems))
    chosen = [s for s in everything if s.light] if light_only else everything
    corpus = build_tier2(chosen, universe, digest=corpus_digest(root))
    corpus.stats["light_only"] = light_only
    return corpus


def tier2_goldens_and_fixtures(light_only: bool = False) -> tuple[list[dict], list[dict]]:
    """The committed tier-2 corpus as (goldens rows, fixture dicts), ready to append to the
    tier-1 files. `light_only` keeps the one light scenario per use case."""
    corpus = load_tier2(light_only)
    return corpus.goldens, corpus.fixtures


def collisions(
    tier1_session_ids: set[str],
    tier1_question_ids: set[str],
    corpus: Tier2Corpus,
) -> list[str]:
    """Ids tier 2 would share with tier 1 in one batch (must be empty before merging: a
    shared session id would merge two different sessions in the graph)."""
    out = [
        f"session {fx['session_id']}"
        for fx in corpus.fixtures
        if fx["session_id"] in tier1_session_ids
    ]
    out += [f"question {g['name']}" for g in corpus.goldens if g["name"] in tier1_question_ids]
    return out
