"""Read the tier-2 YAML under `corpus/tier2/` into validated models.

Layout (see corpus/tier2/README.md):

    corpus/tier2/universe/company.yaml      the directory: teams, people, bots, services
    corpus/tier2/universe/events/*.yaml     `events: [...]`, the source events
    corpus/tier2/scenarios/*.yaml           `scenarios: [...]`

Every problem is collected, then raised once as a `Tier2SchemaError` naming file, scenario
(or event) id and field. Corpus-wide rules (30 scenarios, one light scenario per use case...)
live in `corpus_issues`, so a partial corpus (a test's, a light run's) still loads.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from eval_pipeline.corpus.strict_input import StrictYamlLoader
from eval_pipeline.settings import REPO_DIR
from eval_pipeline.tier2.expectations import ingestion_issues
from eval_pipeline.tier2.schema import (
    DIFFICULTIES,
    USE_CASES,
    Company,
    Event,
    Issue,
    Scenario,
    Tier2SchemaError,
    Universe,
    event_issues,
    scenario_issues,
    validation_issues,
)

TIER2_DIR = REPO_DIR / "corpus" / "tier2"
COMPANY_FILE = Path("universe") / "company.yaml"
EVENTS_DIR = Path("universe") / "events"
SCENARIOS_DIR = Path("scenarios")
MIN_SCENARIOS = 30
MIN_ADVERSARIAL = 3

M = TypeVar("M", bound=BaseModel)


def _rel(path: Path, root: Path) -> str:
    """Paths in messages and source_file: relative to the repo when inside it."""
    for base in (REPO_DIR, root):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


def _read_yaml(path: Path, root: Path, key: str | None) -> tuple[Any, list[Issue]]:
    name = _rel(path, root)
    try:
        # The one strict reader: no key twice, no alias, bounded nesting.
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=StrictYamlLoader)
    except OSError as exc:
        return None, [Issue(name, "-", "(file)", f"cannot read: {exc.strerror or exc}")]
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        return None, [Issue(name, "-", "(file)", f"invalid YAML{line}: {problem}")]
    if key is None:
        return data, []
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        return None, [Issue(name, "-", key, f"the file must hold a mapping with a list {key!r}")]
    extra = sorted(set(data) - {key})
    if extra:
        return None, [Issue(name, "-", str(extra[0]), f"unknown top-level key (only {key!r})")]
    return data[key], []


def _yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if p.is_file())


def _validated_items(
    root: Path, directory: Path, key: str, model: type[M], issues: list[Issue]
) -> Iterator[tuple[str, str, M]]:
    """(file name, owner label, validated item) for every item of every YAML file in
    `directory`; every problem is appended to `issues` and its item skipped."""
    files = _yaml_files(root / directory)
    if not files:
        issues.append(Issue(_rel(root / directory, root), "-", "(file)", f"no {key[:-1]} files"))
    kind = key[:-1]  # "events" -> "event", "scenarios" -> "scenario"
    for path in files:
        name = _rel(path, root)
        items, problems = _read_yaml(path, root, key)
        issues += problems
        for i, item in enumerate(items or []):
            owner = item.get("id") if isinstance(item, dict) else None
            owner = f"{kind} {owner!r}" if isinstance(owner, str) else f"{key}[{i}]"
            try:
                yield name, owner, model.model_validate(item)
            except ValidationError as exc:
                issues += validation_issues(exc, name, owner)


def load_universe(root: str | Path | None = None) -> Universe:
    root = Path(root) if root is not None else TIER2_DIR
    issues: list[Issue] = []
    raw, problems = _read_yaml(root / COMPANY_FILE, root, None)
    issues += problems
    company: Company | None = None
    if raw is not None:
        try:
            company = Company.model_validate(raw)
        except ValidationError as exc:
            issues += validation_issues(exc, _rel(root / COMPANY_FILE, root), "company")
    events: dict[str, Event] = {}
    where: dict[str, str] = {}
    for name, owner, event in _validated_items(root, EVENTS_DIR, "events", Event, issues):
        if event.id in events:
            issues.append(Issue(name, owner, "id", f"duplicate: also in {where[event.id]}"))
            continue
        if company is not None:
            issues += event_issues(event, company, name)
        events[event.id] = event
        where[event.id] = name
    if issues:
        raise Tier2SchemaError(issues)
    assert company is not None
    return Universe(company, events)


def load_scenarios(
    light_only: bool = False,
    *,
    root: str | Path | None = None,
    universe: Universe | None = None,
) -> list[Scenario]:
    """Every scenario, validated against the universe, in file then authored order."""
    root = Path(root) if root is not None else TIER2_DIR
    universe = universe if universe is not None else load_universe(root)
    issues: list[Issue] = []
    scenarios: list[Scenario] = []
    where: dict[str, str] = {}
    for name, owner, scenario in _validated_items(
        root, SCENARIOS_DIR, "scenarios", Scenario, issues
    ):
        scenario._source_file = name
        if scenario.id in where:
            issues.append(
                Issue(name, owner, "id", f"duplicate scenario id: also in {where[scenario.id]}")
            )
            continue
        where[scenario.id] = name
        found = scenario_issues(scenario, universe) + ingestion_issues(scenario, universe)
        issues += [Issue(x.file, owner, x.field, x.message) for x in found]
        scenarios.append(scenario)
    if issues:
        raise Tier2SchemaError(issues)
    return [s for s in scenarios if s.light] if light_only else scenarios


def corpus_issues(scenarios: list[Scenario], *, light_only: bool = False) -> list[str]:
    """Rules on the whole set: coverage of use cases and difficulties, light subset."""
    out = []
    light = Counter(s.use_case for s in scenarios if s.light)
    for uc in USE_CASES:
        if light[uc] != 1:
            out.append(f"use case {uc} has {light[uc]} light scenario(s); exactly 1 is required")
    if light_only:
        return out
    if len(scenarios) < MIN_SCENARIOS:
        out.append(f"{len(scenarios)} scenarios; at least {MIN_SCENARIOS} are required")
    adversarial = sum(1 for s in scenarios if s.difficulty == "adversarial")
    if adversarial < MIN_ADVERSARIAL:
        out.append(f"{adversarial} adversarial scenarios; at least {MIN_ADVERSARIAL} required")
    cells = Counter((s.use_case, s.difficulty) for s in scenarios)
    for uc in USE_CASES:
        for d in DIFFICULTIES:
            if not cells[(uc, d)]:
                out.append(f"no {uc} scenario at difficulty {d}")
    return out


def corpus_digest(root: str | Path | None = None) -> str:
    """sha256 over every tier-2 YAML file (relative path + bytes): the tier-2 corpus pin."""
    root = Path(root) if root is not None else TIER2_DIR
    hasher = hashlib.sha256()
    for path in sorted(root.rglob("*.yaml")):
        hasher.update(str(path.relative_to(root)).encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()
