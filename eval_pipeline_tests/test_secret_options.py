"""A secret in an option is refused before anything launches, in one line that does not show
it (issue 28, finding 4): options are recorded in Dagster's run storage, the manifest and the
run directory's name. Each case is one the probe tried, through the CLI's own parsing and
`preflight`, as `eval-pipeline run` does; nothing is launched."""

from __future__ import annotations

import pytest

from eval_pipeline.cli import build_parser
from eval_pipeline.preflight import PreflightError, preflight
from eval_pipeline.run_cli import UsageError, run_config_from_args

KEY = "sk-proj-Q7fT2mZp9LxV4bNc8RsW1yHd6KjG3eUa5oPi0tYr"  # in the environment: known
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"  # nowhere: found by its shape
PASSWORD = "hunter2-SECRETVALUE-9"  # neither: found by where it is

CASES = {
    "a password in the graph URI's query": (
        ["--backend", "memgraph", "--graph-uri", f"bolt://127.0.0.1:9?password={PASSWORD}"],
        "--graph-uri bolt://127.0.0.1:9/… must not carry credentials (its query",
    ),
    "user:password@ in the graph URI": (
        ["--backend", "memgraph", "--graph-uri", f"bolt://neo:{PASSWORD}@127.0.0.1:9"],
        "--graph-uri bolt://127.0.0.1:9/… must not carry credentials (user:password@)",
    ),
    "user:password@ in a URI that is not Bolt": (
        ["--backend", "memgraph", "--graph-uri", f"http://neo:{PASSWORD}@127.0.0.1:9"],
        "must not carry credentials (user:password@)",
    ),
    "a token in the graph HTTP URL's query": (
        ["--graph-http-url", f"http://127.0.0.1:9/?token={PASSWORD}"],
        "--graph-http-url http://127.0.0.1:9/… must not carry credentials (its query",
    ),
    "the key in a base URL's path": (
        ["--reader", f"openai:gpt-4o-mini@http://127.0.0.1:9/{KEY}/v1"],
        "base_url must not carry a key (its path)",
    ),
    "an unknown token in a base URL's path": (
        ["--reader", f"openai:gpt-4o-mini@http://127.0.0.1:9/{HF}/v1"],
        "base_url must not carry a key (its path)",
    ),
    "an hf_ token as a model name": (
        ["--judge", f"openai:{HF}"],
        "the model name looks like an API key",
    ),
    "an hf_ token as a local model": (
        ["--reader", f"local:{HF}"],
        "the model name looks like an API key",
    ),
    "the key as the label": (
        ["--label", KEY],
        "--label holds what looks like a secret",
    ),
    "an unknown token as the label": (
        ["--label", f"try-{HF}"],
        "--label holds what looks like a secret",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_secret_in_an_option_is_refused_without_showing_it(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    argv, expected = CASES[case]
    args = build_parser().parse_args(["run", "--sample", "2", "--no-canaries", *argv])
    with pytest.raises((PreflightError, UsageError)) as refused:
        run, _ = run_config_from_args(args)
        preflight(run)
    message = str(refused.value)
    assert expected in message
    assert "\n" not in message
    for secret in (KEY, HF, PASSWORD):
        for i in range(len(secret) - 7):
            assert secret[i : i + 8] not in message, (secret, message)


def test_a_plain_graph_uri_and_base_url_still_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Routing context on neo4j://, a versioned path, a pinned revision: not secrets."""
    from eval_pipeline.llm import parse_provider_spec
    from eval_pipeline.preflight import check_graph_uri

    check_graph_uri("neo4j://memgraph-{batch}:7687?region=eu")
    check_graph_uri("bolt://127.0.0.1:7687")
    check_graph_uri("bolt://a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7.db.example.com:7687")  # cloud host
    spec = parse_provider_spec("openai_compatible:qwen2.5-0.5b@http://127.0.0.1:8080/openai/v1")
    assert spec.base_url == "http://127.0.0.1:8080/openai/v1"
    # A gateway's account id (32 hex digits) in the path is an id, not a key.
    gateway = "https://gateway.example.com/v1/0123456789abcdef0123456789abcdef/gw/openai"
    assert parse_provider_spec(f"openai:gpt-4o-mini@{gateway}").base_url == gateway
