"""A throwaway tier-2 corpus: the committed universe plus scenario files written by a test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline.tier2.load import TIER2_DIR


def scenario(**overrides: Any) -> dict[str, Any]:
    """A valid PREF scenario over committed events; override fields to break it."""
    base: dict[str, Any] = {
        "id": "pref-test-one",
        "use_case": "PREF",
        "difficulty": "easy",
        "source_mix": ["doc"],
        "summary": "test scenario",
        "signal": ["acme-doc-adr-015"],
        "distractors": ["acme-pr-checkout-web-88", "acme-chat-offsite"],
        "must_cite": ["acme-doc-adr-015"],
        "must_not_cite": ["acme-pr-checkout-web-88"],
        "questions": [{"ask": "Line length?", "expected": "100, ruff"}],
        "criteria": [
            {"criterion": "says 100", "weight": 60},
            {"criterion": "names ruff", "weight": 40},
        ],
    }
    base.update(overrides)
    return base


def make_corpus(tmp_path: Path, files: dict[str, Any], *, universe: bool = True) -> Path:
    """`files`: scenario file name → list of scenarios (dumped as YAML) or raw text."""
    root = tmp_path / "tier2"
    if universe:
        shutil.copytree(TIER2_DIR / "universe", root / "universe")
    (root / "scenarios").mkdir(parents=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else yaml.safe_dump({"scenarios": content})
        (root / "scenarios" / name).write_text(text, encoding="utf-8")
    return root
