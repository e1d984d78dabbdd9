"""ARCHITECTURE.md says what the code does today: its stage list is the chain's, and its
package table names exactly the packages (and top-level modules it lists) that exist."""

from __future__ import annotations

import re

from eval_pipeline.assets.jobs import asset_order, stage_job
from eval_pipeline.ops.chain import chain_stages
from eval_pipeline.settings import PACKAGE_DIR, REPO_DIR

TEXT = (REPO_DIR / "ARCHITECTURE.md").read_text(encoding="utf-8")


def test_the_stage_list_is_the_chain():
    block = TEXT.split("```", 2)[1]
    listed = [s.strip() for s in re.split(r"→", block.replace("\n", " ")) if s.strip()]
    assert tuple(listed) == chain_stages(stage_job(), asset_order())


def test_the_package_table_is_the_package():
    rows = re.findall(r"^\| `([^`]+)`(?:, `([^`]+)`)? \|", TEXT, flags=re.MULTILINE)
    named = {name for row in rows for name in row if name}
    packages = {
        f"{p.name}/" for p in PACKAGE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert packages <= named, f"packages missing from the table: {packages - named}"
    for name in named:
        path = PACKAGE_DIR / name.rstrip("/")
        assert path.exists(), f"ARCHITECTURE.md names {name}, which does not exist"


def test_every_module_it_names_exists():
    refs = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", TEXT))
    assert len(refs) > 20  # the document points into the code throughout
    for ref in refs:
        assert (PACKAGE_DIR / ref).exists() or (REPO_DIR / ref).exists(), ref
