"""The reader: retrieval context + question + question date -> an answer.

- `ExtractiveReader` (offline, labelled `offline:extractive`): the retrieved passage sharing the
  most content words with the question, returned as is. No model, deterministic; a floor for
  answer proxies, not a competitor. With nothing relevant retrieved it abstains.
- `LLMReader`: the `reader` role of the LLM layer, told what day "today" is (LongMemEval's
  temporal questions are relative to the question date).

Abstention is a valid answer (LongMemEval has questions whose answer is not in memory), so it
is a fixed sentence, never an empty string or None: None means no answer was produced.

What a reader sent is checkable (protocol check `protocol_reader_date`, `score.protocol`): a
reader that prompts a model returns a `ReaderReply` with the exact prompt it sent, and the
runner records whether the question date is in it. A reader with no prompt (`sends_prompt =
False`, the extractive one) returns its answer as a plain string.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from eval_pipeline.retrieve.terms import content_terms, stems, words

if TYPE_CHECKING:
    from eval_pipeline.llm import LLMLayer, RoleClient

ABSTENTION = "I don't know: nothing in the retrieved memory answers this question."
EXTRACTIVE_LABEL = "offline:extractive"
OFFLINE_SPECS = frozenset({"offline", "extractive", EXTRACTIVE_LABEL})

# Bumped with any change to what a reader answers from the same context: the LLM prompt, or
# the extractive reader's matching (2: word stems, as the full-text query expands them).
READER_PROMPT_VERSION = 2

READER_SYSTEM = (
    "You answer a user's question about their own past conversations with an assistant, "
    "using only the memory excerpts provided. Excerpts are in rank order and may be "
    "irrelevant; each may start with its date and speaker in brackets. Resolve relative "
    "dates against the current date given. If the excerpts do not contain the answer, say "
    "that you don't know rather than guess. Reply with the answer only, in one or two "
    "sentences."
)


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


class ExtractiveReader:
    """The best-matching passage by content-word overlap; ties go to the better rank."""

    label = EXTRACTIVE_LABEL
    sends_prompt = False  # no model, no prompt: the date check does not apply

    def answer(self, question: str, question_date: str, context: list[str]) -> str:
        best = best_passage(question, context)
        return ABSTENTION if best is None else context[best]


def best_passage(question: str, context: list[str]) -> int | None:
    """Index of the passage sharing the most distinct content words with `question`, compared
    by stem ("marathons" matches "marathon", as the full-text query does).

    None when no passage shares any (nothing relevant: abstain).
    """
    wanted = stems(content_terms(question, max_terms=1_000))
    best, best_overlap = None, 0
    for i, passage in enumerate(context):
        overlap = len(wanted & stems(words(passage)))
        if overlap > best_overlap:  # strict: an equal later passage ranks worse
            best, best_overlap = i, overlap
    return best


def reader_prompt(question: str, question_date: str, context: list[str]) -> str:
    """The user message an LLM reader gets: today's date, numbered excerpts, the question."""
    if context:
        excerpts = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(context, 1))
    else:
        excerpts = "(no excerpts were retrieved)"
    return (
        f"Today is {question_date}.\n\n"
        f"Memory excerpts:\n{excerpts}\n\n"
        f"Question: {question}\n"
        "Answer:"
    )


class LLMReader:
    """The `reader` role of the LLM layer. Calls are cached and counted by the layer."""

    def __init__(self, client: RoleClient) -> None:
        if client.is_offline:
            raise ValueError(
                "the LLM reader needs a model for the 'reader' role; use the offline "
                f"'{EXTRACTIVE_LABEL}' reader instead"
            )
        self.client = client
        self.label = client.config.spec

    def answer(self, question: str, question_date: str, context: list[str]) -> ReaderReply:
        prompt = reader_prompt(question, question_date, context)
        completion = self.client.complete_sync(prompt, system=READER_SYSTEM)
        text = completion.text.strip()
        if not text:
            raise ReaderError(f"reader {self.label} returned an empty answer")
        return ReaderReply(text, f"{READER_SYSTEM}\n\n{prompt}")


def make_reader(spec: str, llm: LLMLayer | None) -> Reader:
    """`offline` (the extractive reader) or `llm` (the layer's `reader` role)."""
    spec = (spec or "offline").strip()
    if spec in OFFLINE_SPECS:
        return ExtractiveReader()
    if spec == "llm":
        if llm is None or llm.role("reader").is_offline:
            raise ValueError(
                "reader 'llm' needs a model for the 'reader' role (e.g. openai:gpt-4o-mini); "
                f"offline, use reader '{EXTRACTIVE_LABEL}'"
            )
        return LLMReader(llm.role("reader"))
    raise ValueError(f"unknown reader {spec!r}: use 'offline' (extractive) or 'llm'")
