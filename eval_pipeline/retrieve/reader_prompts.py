"""What a reader model is asked: the project's prompt, or LongMemEval's reader prompt and its
chain-of-thought variant (`retrieval.reader_prompt`, `--reader-prompt`).

- `project` (the default): a system message with the rules (answer from the excerpts only,
  resolve relative dates against today, say you don't know rather than guess, answer only),
  then today's date, the numbered excerpts and the question.
- `longmemeval`: the structure of LongMemEval's own reader prompt, so a run can stand beside
  published runs reader for reader: one user message, no system message — an instruction to
  answer from the relevant chat history, the history chats, each with its date, then the
  current date, then the question, then "Answer:".
- `longmemeval-cot`: the same, its instruction asking first to pick out every piece of the
  history that bears on the question and then to reason over those pieces step by step to the
  answer.

The LongMemEval prompts follow that structure in our own words: nothing is copied from
LongMemEval's code or prose (the project's judge prompt, `score.judge_prompt`, is written
the same way). A retrieved excerpt is one history chat: its date and speaker are read off the
retriever's label (`[2023-05-30 23:40, user] ...`).

Each prompt's text is pinned by its hash (`prompt_hash`): runs read under different prompts are
not comparable (`runs.pins`, `reader.prompt`).
"""

from __future__ import annotations

import hashlib
from typing import Literal, get_args

from eval_pipeline.retrieve.extractive import read_label

ReaderPrompt = Literal["project", "longmemeval", "longmemeval-cot"]
READER_PROMPTS: tuple[str, ...] = get_args(ReaderPrompt)
DEFAULT_READER_PROMPT: ReaderPrompt = "project"

PROJECT_SYSTEM = (
    "You answer a user's question about their own past conversations with an assistant, "
    "using only the memory excerpts provided. Excerpts are in rank order and may be "
    "irrelevant; each may start with its date and speaker in brackets. Resolve relative "
    "dates against the current date given. If the excerpts do not contain the answer, say "
    "that you don't know rather than guess. Reply with the answer only, in one or two "
    "sentences."
)

# LongMemEval's structure, our words (see the module doc).
_HISTORY_INTRO = (
    "Below are excerpts from earlier conversations you had with a user, each dated. Answer "
    "the question at the end from whatever in those conversations bears on it."
)
_STEP_BY_STEP = (
    " Work it out in steps: first write down every fact from the conversations that matters "
    "for the question, then reason over those facts one step at a time until you reach the "
    "answer."
)


def project_prompt(question: str, question_date: str, context: list[str]) -> str:
    """The user message of the project's prompt: today's date, numbered excerpts, question."""
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


def history_chats(context: list[str]) -> str:
    """Each excerpt as a dated history chat, its speaker before its text."""
    if not context:
        return "(no conversations were retrieved)"
    chats = []
    for i, raw in enumerate(context, 1):
        passage = read_label(raw)
        said = f"{passage.role}: {passage.text}" if passage.role else passage.text
        chats.append(f"### Conversation {i}\nDate: {passage.date or 'unknown'}\n{said}")
    return "\n\n".join(chats)


def longmemeval_prompt(
    question: str, question_date: str, context: list[str], *, step_by_step: bool = False
) -> str:
    intro = _HISTORY_INTRO + (_STEP_BY_STEP if step_by_step else "")
    return (
        f"{intro}\n\n"
        f"Earlier conversations:\n\n{history_chats(context)}\n\n"
        f"Today's date: {question_date}\n"
        f"Question: {question}\n"
        "Answer:"
    )


def build_prompt(
    name: str, question: str, question_date: str, context: list[str]
) -> tuple[str | None, str]:
    """(system message or None, user message) of prompt `name`."""
    if name == "project":
        return PROJECT_SYSTEM, project_prompt(question, question_date, context)
    if name in ("longmemeval", "longmemeval-cot"):
        cot = name == "longmemeval-cot"
        return None, longmemeval_prompt(question, question_date, context, step_by_step=cot)
    raise ValueError(f"unknown reader prompt {name!r}: use one of {', '.join(READER_PROMPTS)}")


def sent_text(system: str | None, user: str) -> str:
    """The prompt as sent, in one string (what the reader reports for the date check)."""
    return user if system is None else f"{system}\n\n{user}"


def prompt_hash(name: str) -> str:
    """sha256 of prompt `name` rendered on placeholders: its text, whatever it is given."""
    system, user = build_prompt(
        name, "{question}", "{question_date}", ["[2023-01-01 00:00, user] {excerpt}"]
    )
    return hashlib.sha256(sent_text(system, user).encode("utf-8")).hexdigest()
