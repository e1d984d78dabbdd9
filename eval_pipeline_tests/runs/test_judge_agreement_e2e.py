"""End to end: a judge checked with `judge-check`, then a real `eval-pipeline run` judged by it
(embedded graph, real Dagster instance, the judge behind the scripted wire server; the CLI's
entry point in this process, `chain_runner`): the run's manifest carries the check's kappa,
and `compare` and the report show it."""

from __future__ import annotations

import json

import pytest

from eval_pipeline.corpus.judge_labels import DEFAULT_LABELS
from eval_pipeline_tests.wire_server import RecordedRequest, ScriptedReply, WireServer

# A judge check and a whole chain: the full suite runs them, `make test-fast` not.
pytestmark = pytest.mark.slow

KEY = "sk-test-agreement-e2e-LEAKCANARY-2718"


def responder(request: RecordedRequest) -> ScriptedReply:
    """A judge that says yes to everything (a lenient judge: its kappa is 0 on mixed labels);
    anything but the answer judge's schema gets a reply that fits nothing."""
    text = " ".join(str(m.get("content", "")) for m in request.messages)
    if '"JudgeVerdict"' in text:
        return ScriptedReply(text=json.dumps({"verdict": "yes", "reason": "always yes"}))
    return ScriptedReply(text="no structure here")


def test_a_checked_judge_travels_with_the_run(chain):
    env = {"OPENAI_API_KEY": KEY}
    labels = chain.root / "labels.jsonl"
    labels.write_text(
        "\n".join(DEFAULT_LABELS.read_text(encoding="utf-8").splitlines()[:12]) + "\n"
    )
    committed = len(DEFAULT_LABELS.read_text(encoding="utf-8").splitlines())
    with WireServer(responder=responder) as server:
        judge = f"openai_compatible:judge-model@{server.openai_base_url}"
        args = ("--judge", judge, "--no-probes", "--no-invariant", "--methods", "reference")
        check = chain.cli("judge-check", *args, env=env)  # the committed set
        assert check.returncode == 0, check.stderr[-2000:]
        # A check on a user's file, made later, is stored apart: it never stands in for it.
        mine = chain.cli("judge-check", *args, "--labels", str(labels), env=env)
        assert mine.returncode == 0, mine.stderr[-2000:]
        # the run pins the check of the verdict method it judges with: the model's own here
        agreement = json.loads((check.run_dir / "methods/reference/agreement.json").read_text())
        runs = [
            chain.run(
                "--judge",
                judge,
                "--judge-verdict",
                "reference",
                "--sample",
                "10",
                "--label",
                f"r{i}",
                env=env,
            )
            for i in (1, 2)
        ]
    for res in runs:  # deepeval's metrics get no valid reply: incomplete (4), bundle written
        assert res.returncode in (0, 4), res.stderr[-3000:]
    base, cand = (r.run_dir for r in runs)

    manifest = json.loads((cand / "manifest.json").read_text())
    pin = manifest["pins"]["judge"]["agreement"]
    assert pin["status"] == "checked" and pin["n_items"] == committed
    assert pin["kappa"] == agreement["kappa"]["estimate"]
    assert pin["accuracy"] == agreement["accuracy"]["estimate"] < 1
    assert manifest["pins"]["judge"]["invariant_agreement"]["status"] == "none"
    assert manifest["pins"]["judge"]["invariant_prompt_hash"]

    # Both runs may be incomplete by design (above): this compare is about the agreement lines.
    compared = chain.cli("compare", str(base), str(cand), "--fail-on", "regressed,refused", env=env)
    assert compared.returncode == 0, compared.stderr[-2000:]
    line = next(
        x for x in compared.stdout.splitlines() if x.startswith("judge agreement (answer_judge")
    )
    assert "recorded in the manifest" in line and "WARNING" in line

    html = (cand / "report.html").read_text()
    assert "Judge agreement" in html and f"{committed} unscored" not in html
    assert KEY not in html and KEY not in (cand / "manifest.json").read_text()
