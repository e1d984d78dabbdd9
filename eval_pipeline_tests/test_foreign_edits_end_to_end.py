"""Someone else's edit to the pipeline's graph is refused by the next run (issue 28, finding
6): exit 3 (docs/cli.md: refused), before its first stage, the edit left where it was.

Before, an edit that kept every count (a turn's text) was wiped by the next run with exit 0,
and added nodes were refused by the wipe inside `injected_graph`: a failed stage, exit 1.
"""

from __future__ import annotations

import pytest

from eval_pipeline.run_cli import EXIT_REFUSED
from eval_pipeline_tests.foreign_writer import Foreigner

pytestmark = pytest.mark.slow


def test_a_run_after_someone_elses_edit_is_refused_with_exit_3(chain, graph_dir) -> None:
    first = chain.run("--sample", "6", "--no-canaries", "--label", "ours")
    assert first.returncode == 0, first.stderr[-3000:]
    foreigner = Foreigner(graph_dir, chain.graph["database"])
    try:
        turn = foreigner.cypher("MATCH (t:Turn) RETURN t.turn_id AS id LIMIT 1")[0]["id"]
        foreigner.cypher(f"MATCH (t:Turn {{turn_id: '{turn}'}}) SET t.text = 'forged'")

        edited = chain.run("--sample", "6", "--no-canaries", "--label", "after-edit")
        assert edited.returncode == EXIT_REFUSED, edited.stderr[-3000:]
        last = edited.stderr.strip().splitlines()[-1]
        assert "changes to records already there" in last and "someone else" in last
        assert "[1/9]" not in edited.stderr  # refused before any stage ran

        foreigner.cypher("CREATE (:Customer {id: 1}), (:Customer {id: 2})")
        added = chain.run("--sample", "6", "--no-canaries", "--label", "after-add")
        assert added.returncode == EXIT_REFUSED, added.stderr[-3000:]
        assert "[1/9]" not in added.stderr

        kept = foreigner.cypher(
            "MATCH (n) WHERE n.text = 'forged' OR n:Customer RETURN count(n) AS n"
        )
        assert kept == [{"n": 3}]  # nothing of theirs was wiped
    finally:
        foreigner.close()
