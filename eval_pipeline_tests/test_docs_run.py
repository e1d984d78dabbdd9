"""Every command in README.md and docs/*.md runs as written (issue 27, part 8).

The commands are read from the fenced `bash` blocks (a `\\` continues a line; `# ...` is a
comment) and each is one of three kinds:

- **a synopsis** (it has `[optional]` parts or `A|B` choices): not a command but its grammar;
  every subcommand and `--flag` it names must exist in `eval-pipeline`'s parser;
- **allowed** (`CANNOT_RUN_HERE`, each with its reason): needs what this machine has not got —
  a Docker engine, a hosted model and its key, a Memgraph, a local CPU model's minutes, your
  own package — or is the suite itself;
- **run**: executed on small data by one shared, persistent chain (its own state dir and
  DAGSTER_HOME, the session's graph server), with these substitutions and nothing else:
  `.venv/bin/` → this venv's bin; `$PWD/.eval_state` → the chain's state dir; every `run`
  draws `--sample 2` (a `--sample N` given becomes 2); the graph is the chain's database (a
  `--config` section for `run`, `-c` for `dagster asset materialize`); `run.yaml` → a file
  holding `sample: 2`; `/data/longmemeval_s_cleaned.json` → the bundled sample's file; the run
  placeholders (`RUN`, `RUN1`…, `BASE_RUN`, `CANDIDATE_RUN`, `BASE`, `CANDIDATE`,
  `BASELINE_RUN`) → bundles this chain wrote. Each must exit as documented (0 unless
  `EXPECTED_EXIT` says otherwise, with the doc's own words).

The `next:` hints a run prints are run the same way (`test_next_hints_run_as_printed`).
Anything that runs a chain is `slow`; the synopsis and allow-list checks are fast.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from eval_pipeline.settings import REPO_DIR

DOCS = [REPO_DIR / "README.md", *sorted((REPO_DIR / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell"}
VENV_BIN = Path(sys.executable).parent
SAMPLE = "2"
S_FILE = "/data/longmemeval_s_cleaned.json"
SAMPLE_FILE = REPO_DIR / "corpus" / "upstream" / "longmemeval_sample.json"

_HOSTED = "a hosted model: needs its API key and the network, which the suite never uses"
_LOCAL = "a local CPU model: minutes per question; `make test-real` runs the local models"
_MEMGRAPH = "needs a Memgraph server: none here (the conformance suite runs against one)"
_CI_SCRIPT = (
    "docs/cli.md's CI job (`mine` is your memory, paths read from the JSON): run step by step, "
    "with a memory that forms nothing as `mine`, by test_ci_script.py"
)
_DOCKER = "the Docker deployment: no Docker engine here (deploy tests build what they can)"
CANNOT_RUN_HERE: dict[str, str] = {
    "make run": "creates .venv and installs the project (minutes, once per machine); what it "
    "then runs, `.venv/bin/eval-pipeline run`, runs here",
    "make test": "the test suite itself",
    "DAGSTER_HOME=$PWD/.eval_state/dagster_home .venv/bin/dagster dev "
    "-m eval_pipeline.definitions": (
        "a server that runs until stopped; `eval-pipeline ui-check` starts it and checks the UI "
        "in a browser (its own test)"
    ),
    ".venv/bin/eval-pipeline run --sample 10 --judge openai:gpt-4o-mini": _HOSTED,
    ".venv/bin/eval-pipeline run --repeat 3 --judge openai:gpt-4o-mini": _HOSTED,
    ".venv/bin/eval-pipeline run --sample 10 --judge-panel "
    "match,reference=local:smollm2-135m-instruct --memory none": _LOCAL,
    ".venv/bin/eval-pipeline run --sample 10 --judge-panel "
    "match,reference=local:smollm2-135m-instruct": _LOCAL,
    "eval-pipeline run --sample 10 --reader local --judge local": _LOCAL,
    "eval-pipeline run --judge local:qwen2.5-coder-0.5b-instruct": _LOCAL,
    "eval-pipeline run --judge local:/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf": "a GGUF file of "
    "yours (the path is an example)",
    "eval-pipeline run --judge 'openai_compatible:qwen2.5:7b@http://127.0.0.1:11434/v1'": "an "
    "Ollama server of yours",
    "eval-pipeline run --judge "
    "'openai_compatible:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1'": (
        "a vLLM server of yours"
    ),
    "eval-pipeline run --backend memgraph --graph-uri bolt://127.0.0.1:7687 --graph-database "
    "memgraph": _MEMGRAPH,
    ".venv/bin/eval-pipeline run --memory mypkg.memory:MyMemory --config my-memory.yaml": (
        "your own package (`mypkg` is a placeholder); a --config file's reconcile.options "
        "reaching a plug-in is tested in test_docs_truth"
    ),
    **{
        cmd: _CI_SCRIPT
        for cmd in (
            "eval-pipeline run --repeat 2 --label base --json > base.json",
            "eval-pipeline calibrate RUN1 RUN2 --json > floor.json",
            "eval-pipeline run --memory mine --label cand --json > cand.json",
            "eval-pipeline compare RUN1 CAND_RUN --json > verdict.json",
        )
    },
    "export DAGSTER_POSTGRES_PASSWORD=...": _DOCKER,
    "export DOCKER_GID=$(stat -c %g /var/run/docker.sock)": _DOCKER,
    "export OPENAI_API_KEY=... ANTHROPIC_API_KEY=...": _DOCKER,
    "docker compose up -d --build": _DOCKER,
    "docker compose exec dagster_daemon dagster instance concurrency set graph_instance 1": _DOCKER,
}
# Commands whose documented outcome is not exit 0: (code, what the doc says).
EXPECTED_EXIT: dict[str, tuple[int, str]] = {
    "eval-pipeline llm status": (3, "exit 3: none (no local model server of this state dir)"),
    "python -m eval_pipeline.plugins reconciler notes": (
        2,
        "what it resolves to, or the error (exit 2): no plug-in `notes` is registered here",
    ),
    "python -m eval_pipeline.plugins provider mypkg.llm:TableProvider": (
        2,
        "the error (exit 2): `mypkg` is the reader's package",
    ),
}
PLACEHOLDERS = ("RUN", "RUN1", "RUN2", "RUN3", "BASE_RUN", "CANDIDATE_RUN", "BASE", "CANDIDATE")


@dataclass(frozen=True)
class DocCommand:
    doc: str
    line: int
    text: str  # as written, comments dropped, continuation lines joined, spaces collapsed

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)

    @property
    def synopsis(self) -> bool:
        return bool(re.search(r"\[[^\]]*\]|[A-Za-z0-9_]\|[A-Za-z0-9_]", self.text))

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_commands() -> list[DocCommand]:
    out: list[DocCommand] = []
    for path in DOCS:
        fenced, lang, pending, start = False, "", "", 0
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip().startswith("```"):
                fenced, lang = not fenced, line.strip()[3:].strip()
                continue
            if not fenced or lang not in SHELL:
                continue
            code = _without_comment(line)
            if not pending:
                start = n
            if code.endswith("\\"):
                pending += code[:-1] + " "
                continue
            text = " ".join((pending + code).split())
            pending = ""
            if text:
                out.append(DocCommand(str(path.relative_to(REPO_DIR)), start, text))
    return out


def _without_comment(line: str) -> str:
    """The line up to a `#` that starts a shell comment (not one inside quotes or a word)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


COMMANDS = doc_commands()
SYNOPSES = [c for c in COMMANDS if c.synopsis]
ALLOWED = [c for c in COMMANDS if not c.synopsis and c.text in CANNOT_RUN_HERE]
RUNNABLE = [c for c in COMMANDS if not c.synopsis and c.text not in CANNOT_RUN_HERE]


def test_commands_are_found_and_every_allowance_is_used():
    assert len(COMMANDS) > 40 and RUNNABLE and SYNOPSES
    unused = set(CANNOT_RUN_HERE) - {c.text for c in ALLOWED}
    assert not unused, f"allowed but in no doc (remove them): {sorted(unused)}"
    stale = set(EXPECTED_EXIT) - {c.text for c in RUNNABLE}
    assert not stale, f"expected exits for commands in no doc: {sorted(stale)}"


# --- synopses: the grammar names what exists ----------------------------------------------


def _subparsers(parser) -> dict:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser) -> set[str]:
    out = {s for a in parser._actions for s in a.option_strings}
    for sub in _subparsers(parser).values():
        out |= _flags(sub)
    return out


@pytest.mark.parametrize("cmd", SYNOPSES, ids=str)
def test_a_synopsis_names_only_what_exists(cmd: DocCommand):
    from eval_pipeline.cli import build_parser

    words = cmd.argv
    assert Path(words[0]).name == "eval-pipeline", cmd.text
    subs = _subparsers(build_parser())
    assert words[1] in subs, f"{cmd}: no subcommand {words[1]!r}"
    parser = subs[words[1]]
    nested = _subparsers(parser)
    if nested:  # `graph [GRAPH OPTIONS] status`, `errata verify FILE`, `llm fetch [NAME]`
        named = [w for w in words[2:] if w in nested]
        assert named, f"{cmd}: names none of `{words[1]}`'s subcommands {sorted(nested)}"
    known = _flags(parser)
    for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", cmd.text):
        assert flag in known, f"{cmd}: `{words[1]}` has no option {flag}"


@pytest.mark.parametrize("cmd", ALLOWED, ids=str)
def test_an_allowed_command_says_why(cmd: DocCommand):
    assert len(CANNOT_RUN_HERE[cmd.text]) > 20


def test_an_assignment_holds_well_formed_entries(monkeypatch):
    """docs/plugins.md's EVAL_PIPELINE_PLUGINS line: a variable for the commands after it;
    its entries parse as the registry reads them."""
    from eval_pipeline.plugins.sources import ENV_VAR, env_sources

    (line,) = [c for c in RUNNABLE if c.text.startswith(f"{ENV_VAR}=")]
    value = line.argv[0].split("=", 1)[1]
    monkeypatch.setenv(ENV_VAR, value)
    names = {(s.kind, s.name) for s in env_sources()}
    assert {("provider", "table"), ("reconciler", "notes")} <= names


# --- running them --------------------------------------------------------------------------


class DocsSession:
    """One persistent chain for every command of the docs; bundles by what made them."""

    def __init__(self, chain, tmp: Path) -> None:
        self.chain = chain
        self.tmp = tmp
        self.made: dict[str, list[Path]] = {}
        self.run_yaml = tmp / "run.yaml"
        self.run_yaml.write_text(yaml.safe_dump({"sample": int(SAMPLE)}))

    def bundles(self, text: str) -> list[Path]:
        """The bundles of the doc command `text` (run once, on first need)."""
        if text not in self.made:
            res = self.execute(shlex.split(text))
            assert res.returncode == 0, f"{text}: {res.stderr[-3000:]}"
            self.made[text] = res.run_dirs
        return self.made[text]

    def placeholder(self, name: str) -> str:
        base = ".venv/bin/eval-pipeline run"
        again = ".venv/bin/eval-pipeline run --config run.yaml"  # the same options as `base`
        if name in ("RUN", "BASE_RUN", "BASE", "BASELINE_RUN"):
            return str(self.bundles(base)[-1])
        if name in ("CANDIDATE_RUN", "CANDIDATE"):
            return str(self.bundles(again)[-1])
        k = int(name.removeprefix("RUN")) - 1
        return str(self.repeats()[k])

    def repeats(self) -> list[Path]:
        """Three repeats: the noise-floor hint the base run printed, run as printed."""
        hint = next(h for h in self.hints() if "--repeat" in h)
        return self.bundles(hint)

    def hints(self) -> list[str]:
        """The `next:` lines a run prints (one run, on first need)."""
        if "hints" in self.made:
            return [str(h) for h in self.made["hints"]]
        res = self.execute(shlex.split(".venv/bin/eval-pipeline run --label hints"))
        assert res.returncode == 0, res.stderr[-3000:]
        lines = res.stdout.splitlines()
        start = lines.index("next:") + 1
        out = []
        for line in lines[start:]:
            if not line.startswith("  "):
                break
            out.append(line.split(":", 1)[1].strip())
        self.made["hints"] = out  # type: ignore[assignment] - commands, not bundles
        return out

    def argv(self, words: list[str]) -> tuple[dict[str, str], list[str]]:
        """(environment, argv) of a doc command, substituted as the module docstring says."""
        env: dict[str, str] = {}
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            key, value = words.pop(0).split("=", 1)
            env[key] = value.replace("$PWD/.eval_state", str(self.chain.state))
        out = []
        for word in words:
            if word in PLACEHOLDERS or word == "BASELINE_RUN":
                word = self.placeholder(word)
            elif word == "run.yaml":
                word = str(self.run_yaml)
            elif word == S_FILE:
                word = str(SAMPLE_FILE)
            out.append(word.replace("$PWD/.eval_state", str(self.chain.state)))
        return env, out

    def execute(self, words: list[str]):
        from eval_pipeline_tests.chain_runner import Ran

        env, argv = self.argv(list(words))
        program = Path(argv[0]).name
        if program == "eval-pipeline":
            args = argv[1:]
            if args[:1] == ["run"]:
                args = _small(args[1:])
                with _importable(env.pop("PYTHONPATH", None)):
                    return self.chain.run(*args, env=env)
            return self.chain.cli(*args, env=env)
        if program == "dagster":
            config = self.tmp / "graph.yaml"
            config.write_text(yaml.safe_dump({"resources": self.chain.graph_section()}))
            with self.chain.environment(env):
                return self.chain.dagster(*argv[1:], "-c", str(config))
        if program == "python":
            ran = subprocess.run(
                [sys.executable, *argv[1:]],
                cwd=REPO_DIR,
                env={**self.chain.subprocess_env(), **env},
                capture_output=True,
                text=True,
                timeout=300,
            )
            return Ran(ran.returncode, ran.stdout, ran.stderr)
        raise AssertionError(f"no way to run {program!r}: allow it with its reason, or run it")


def _small(args: list[str]) -> list[str]:
    """`run` on small data: `--sample 2`, whatever sample was written."""
    if "--sample" in args:
        i = args.index("--sample")
        return [*args[:i], "--sample", SAMPLE, *args[i + 2 :]]
    return [*args, "--sample", SAMPLE]


class _importable:
    """PYTHONPATH=DIR for a command run in this process: DIR on sys.path for the call."""

    def __init__(self, value: str | None) -> None:
        self.dirs = [str((REPO_DIR / d).resolve()) for d in (value or "").split(os.pathsep) if d]

    def __enter__(self) -> None:
        sys.path[:0] = self.dirs

    def __exit__(self, *exc: object) -> None:
        for d in self.dirs:
            sys.path.remove(d)


@pytest.fixture(scope="module")
def docs(chain_base, graph_dir, tmp_path_factory) -> Iterator[DocsSession]:
    from eval_pipeline_tests.conftest import new_chain

    yield DocsSession(
        new_chain(chain_base, graph_dir, persistent=True), tmp_path_factory.mktemp("docs")
    )


def _runs_a_chain(cmd: DocCommand) -> bool:
    words = cmd.argv
    return (
        any(Path(w).name == "dagster" for w in words)
        or ("run" in words and any(Path(w).name == "eval-pipeline" for w in words))
        or any(w in PLACEHOLDERS for w in words)
    )


def _unique(commands: list[DocCommand]) -> list[DocCommand]:
    """One of each command, `.venv/bin/eval-pipeline` and `eval-pipeline` being one program."""
    seen: dict[str, DocCommand] = {}
    for c in commands:
        seen.setdefault(c.text.replace(".venv/bin/", ""), c)
    return list(seen.values())


RUNNABLE_COMMANDS = [
    c for c in _unique(RUNNABLE) if not c.text.startswith("EVAL_PIPELINE_PLUGINS=")
]


@pytest.mark.parametrize(
    "cmd",
    [
        pytest.param(c, marks=[pytest.mark.slow] if _runs_a_chain(c) else [])
        for c in RUNNABLE_COMMANDS
    ],
    ids=str,
)
def test_a_doc_command_runs_as_written(docs: DocsSession, cmd: DocCommand):
    code, why = EXPECTED_EXIT.get(cmd.text, (0, "it completes"))
    res = docs.execute(cmd.argv)
    assert res.returncode == code, (
        f"{cmd} `{cmd.text}` exited {res.returncode}, expected {code} ({why}): {res.stderr[-3000:]}"
    )
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    if code == 2:
        errors = [line for line in res.stderr.splitlines() if "error" in line.lower()]
        assert errors, res.stderr


@pytest.mark.slow
def test_next_hints_run_as_printed(docs: DocsSession):
    compare, repeat, ui = docs.hints()
    res = docs.execute(shlex.split(compare))
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(docs.repeats()) == 3  # the noise-floor hint, as printed
    env, argv = ui.split(" ", 1)
    assert env.startswith("DAGSTER_HOME=") and Path(env.split("=", 1)[1]).is_dir()
    exe = shlex.split(argv)[0]
    assert os.access(exe if os.sep in exe else VENV_BIN / exe, os.X_OK), ui
