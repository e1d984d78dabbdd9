"""A scenario's ingestion expectations must come from its own signal events.

An expected entity or claim is said in a turn of the signal (as the turns are injected), a
forbidden one is not. Checked when the corpus loads (`load.load_scenarios`), beside
`schema.scenario_issues`, and reported the same way: `Issue(file, scenario, field, message)`.
"""

from __future__ import annotations

from eval_pipeline.tier2.schema import Issue, Scenario, Universe
from eval_pipeline.tier2.terms import claim_in, term_in
from eval_pipeline.tier2.turns import render_turns


def ingestion_issues(scenario: Scenario, universe: Universe) -> list[Issue]:
    file, sid = scenario.source_file, scenario.id
    out: list[Issue] = []

    def bad(fld: str, msg: str) -> None:
        out.append(Issue(file, sid, fld, msg))

    if any(e not in universe for e in scenario.signal_ids):
        return out  # `scenario_issues` names the unknown ids
    turns = [t["content"] for e in scenario.signal_ids for t in render_turns(universe[e])]
    for i, name in enumerate(scenario.expected_entities):
        if not name.strip():
            bad(f"expected_entities[{i}]", "is empty")
        elif not any(term_in(name, t) for t in turns):
            bad(f"expected_entities[{i}]", f"{name!r} is in no turn of the signal events")
    for i, c in enumerate(scenario.expected_claims):
        if not any(claim_in(c.terms, t) for t in turns):
            bad(f"expected_claims[{i}]", f"terms {c.terms} are in no one turn of the signal")
    for i, c in enumerate(scenario.forbidden_claims):
        held = [t.split("\n")[0][:60] for t in turns if claim_in(c.terms, t)]
        if held:
            bad(f"forbidden_claims[{i}]", f"terms {c.terms} are what the signal says: {held[0]!r}")
    return out
