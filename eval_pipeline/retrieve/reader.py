"""The reader: retrieval context + question + question date -> an answer.

- `ExtractiveReader` (offline, labelled `offline:extractive`, `retrieve.extractive`): the one
  sentence (or clause span) of the retrieved context that answers, without its timestamp
  label; with nothing that answers, it abstains. No model, deterministic: a baseline for
  answer proxies, not a competitor.
- `LLMReader`: the `reader` role of the LLM layer, told what day "today" is (LongMemEval's
  temporal questions are relative to the question date), under the prompt the run chose
  (`retrieve.reader_prompts`: the project's, or LongMemEval's reader prompt and its
  chain-of-thought variant).

Abstention is a valid answer (LongMemEval has questions whose answer is not in memory), so it
is a fixed sentence, never an empty string or None: None means no answer was produced.

What a reader sent is checkable (protocol check `protocol_reader_date`, `score.protocol`): a
reader that prompts a model returns a `ReaderReply` with the exact prompt it sent, and the
runner records whether the question date is in it. A reader with no prompt (`sends_prompt =
False`, the extractive one) returns its answer as a plain string.

What a reader answers from a given context is pinned (`reader_pins`, the manifest's
`reader_prompt`, a comparability pin): `READER_PROMPT_VERSION`, the prompt's name and the hash
of its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from eval_pipeline.retrieve.extractive import ABSTENTION, EXTRACTIVE_LABEL, ExtractiveReader
from eval_pipeline.retrieve.reader_prompts import (
    DEFAULT_READER_PROMPT,
    build_prompt,
    prompt_hash,
    sent_text,
)

if TYPE_CHECKING:
    from eval_pipeline.llm import LLMLayer, RoleClient

OFFLINE_SPECS = frozenset({"offline", "extractive", EXTRACTIVE_LABEL})

# Bumped with any change to what a reader answers from the same context: the LLM prompts, or
# the extractive reader's rules (2: word stems, as the full-text query expands them; 3: one
# answering sentence or clause span, label stripped, never a whole passage).
READER_PROMPT_VERSION = 3

__all__ = [
    "ABSTENTION",
    "EXTRACTIVE_LABEL",
    "ExtractiveReader",
    "LLMReader",
    "READER_PROMPT_VERSION",
    "Reader",
    "ReaderError",
    "ReaderReply",
    "as_reply",
    "make_reader",
    "reader_pins",
    "sends_prompt",
]


class ReaderError(RuntimeError):
    """The reader produced no answer (the result records answer None and this message)."""


class ReaderReply(NamedTuple):
    """An answer and the exact prompt (system and user text) the reader sent for it."""

    text: str
    prompt: str


@runtime_checkable
class Reader(Protocol):
    """`answer` returns the answer, or a `ReaderReply` carrying the prompt it sent. A reader
    without `sends_prompt = False` that returns a plain string leaves the date unverified."""

    label: str

    def answer(
        self, question: str, question_date: str, context: list[str]
    ) -> str | ReaderReply: ...


def as_reply(result: str | ReaderReply) -> tuple[str, str | None]:
    """(answer, the prompt sent or None) of whatever a reader returned."""
    if isinstance(result, ReaderReply):
        return result.text, result.prompt
    return result, None


def sends_prompt(reader: object) -> bool:
    return bool(getattr(reader, "sends_prompt", True))


class LLMReader:
    """The `reader` role of the LLM layer, under prompt `prompt` (`retrieve.reader_prompts`).
    Calls are cached and counted by the layer."""

    def __init__(self, client: RoleClient, prompt: str = DEFAULT_READER_PROMPT) -> None:
        if client.is_offline:
            raise ValueError(
                "the LLM reader needs a model for the 'reader' role; use the offline "
                f"'{EXTRACTIVE_LABEL}' reader instead"
            )
        build_prompt(prompt, "", "", [])  # an unknown prompt is refused here, not mid-run
        self.client = client
        self.prompt = prompt
        self.label = client.config.spec

    def answer(self, question: str, question_date: str, context: list[str]) -> ReaderReply:
        system, user = build_prompt(self.prompt, question, question_date, context)
        completion = self.client.complete_sync(user, system=system)
        text = completion.text.strip()
        if not text:
            raise ReaderError(f"reader {self.label} returned an empty answer")
        return ReaderReply(text, sent_text(system, user))


def reader_pins(reader: object) -> dict[str, Any]:
    """What a reader answers from a given context besides its model: the rules' version, and
    for a reader that prompts a model its prompt's name and text hash (None: no prompt)."""
    prompt = getattr(reader, "prompt", None) if sends_prompt(reader) else None
    return {
        "version": READER_PROMPT_VERSION,
        "prompt": prompt,
        "prompt_hash": prompt_hash(prompt) if isinstance(prompt, str) else None,
    }


def make_reader(spec: str, llm: LLMLayer | None, prompt: str = DEFAULT_READER_PROMPT) -> Reader:
    """`offline` (the extractive reader) or `llm` (the layer's `reader` role, asked under
    `prompt`)."""
    spec = (spec or "offline").strip()
    if spec in OFFLINE_SPECS:
        return ExtractiveReader()
    if spec == "llm":
        if llm is None or llm.role("reader").is_offline:
            raise ValueError(
                "reader 'llm' needs a model for the 'reader' role (e.g. openai:gpt-4o-mini); "
                f"offline, use reader '{EXTRACTIVE_LABEL}'"
            )
        return LLMReader(llm.role("reader"), prompt)
    raise ValueError(f"unknown reader {spec!r}: use 'offline' (extractive) or 'llm'")
