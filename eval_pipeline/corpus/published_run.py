"""Published LongMemEval runs in the field's formats, and the question set they answer.

Teams publish their per-question answers with the reference judge's verdicts, in a few
shapes (`../shared/data/third_party_runs/README.md` has real ones):

- LongMemEval's `evaluate_qa.py` output, JSONL: `{question_id, hypothesis, autoeval_label:
  {model, label}}`, the label a bool or 1/0 (sometimes repeated at top level as `label`);
- answers alone (`{question_id, hypothesis}`, the official scorer's input), with the verdicts
  kept in a second file joined on `question_id` (`{question_id, correct}`, or a JSON object
  keyed by question id);
- JSON arrays instead of JSONL, rows in any order, labels as `yes`/`no` strings.

`load_published_run` reads any of them into `PublishedAnswer`s; `load_question_set` reads
what they answer (the pinned LongMemEval file itself, or a references file with `question_id,
question, answer, question_type` per question; the abstention flag is LongMemEval's `_abs`
suffix). Every problem is one line naming the file, the record (line or question id) and the
field; nothing is guessed silently: a record whose answer field cannot be told is refused with
the fields it has.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.corpus import strict_input
from eval_pipeline.corpus.errors import CorpusError
from eval_pipeline.corpus.json_stream import iter_json_array

# The fields an answer is found under, in this order ("answer" is often the reference).
ANSWER_FIELDS = ("hypothesis", "response", "prediction", "model_answer", "generated_answer")
ANSWER_SUFFIXES = ("_answer", "_hypothesis", "_response", "_prediction")
# The fields a verdict is found under, in this order.
LABEL_FIELDS = ("autoeval_label", "label", "correct", "is_correct", "judgment", "judgement",
                "verdict", "evaluation")  # fmt: skip
_YES = frozenset({"yes", "true", "correct", "1", "y"})
_NO = frozenset({"no", "false", "incorrect", "wrong", "0", "n"})


class PublishedRunError(ValueError):
    """A published run or question set that cannot be read as it says: one line."""


class Question(BaseModel):
    """One question of the set a run answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    question: str
    answer: str  # the reference (LongMemEval's `answer`, a number made a string)
    question_type: str

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")


@dataclass(frozen=True)
class QuestionSet:
    path: str
    sha256: str
    questions: dict[str, Question]

    def __len__(self) -> int:
        return len(self.questions)


class PublishedAnswer(BaseModel):
    """One answer of a published run and the verdict the run's judge gave it (None: none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    hypothesis: str  # "" when the run gave none (judged as an empty answer, never dropped)
    label: bool | None = None
    label_model: str | None = None
    where: str  # "file:line" or "file: question X", for messages


@dataclass(frozen=True)
class PublishedRun:
    path: str
    sha256: str
    answers: list[PublishedAnswer]
    answer_field: str
    labels_path: str | None = None
    labels_sha256: str | None = None
    unlabelled: list[str] = field(default_factory=list)  # answers the labels file lacks
    labels_without_answer: list[str] = field(default_factory=list)

    @property
    def label_models(self) -> list[str]:
        return sorted({a.label_model for a in self.answers if a.label_model})


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _records(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, record) of a JSONL file, a JSON array or a JSON object keyed by question id
    (each value a record, or a bare verdict); the key becomes `question_id`."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    except OSError as exc:
        raise PublishedRunError(f"{path}: cannot read: {exc.strerror}") from None
    if head.startswith("["):
        try:
            for index, record in iter_json_array(path):
                yield f"{path}: record {index}", record
        except CorpusError as exc:
            raise PublishedRunError(f"{path}: {exc}") from None
        return
    text = path.read_text(encoding="utf-8", errors="strict")
    if head.startswith("{") and "\n{" not in text.strip():
        try:
            whole = strict_input.loads(text)
        except (json.JSONDecodeError, strict_input.StrictInputError) as exc:
            raise PublishedRunError(f"{path}: invalid JSON ({exc})") from None
        if _keyed_by_id(whole):
            for key, value in whole.items():
                record = dict(value) if isinstance(value, Mapping) else {"label": value}
                record.setdefault("question_id", key)
                yield f"{path}: question {key}", record
            return
        yield f"{path}:1", whole
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{lineno}", strict_input.loads(line)
        except (json.JSONDecodeError, strict_input.StrictInputError) as exc:
            raise PublishedRunError(f"{path}:{lineno}: invalid JSON ({exc})") from None


def _keyed_by_id(whole: Any) -> bool:
    """A JSON object of records (or bare verdicts) keyed by question id, not one record."""
    if not isinstance(whole, Mapping) or not whole or "question_id" in whole:
        return False
    return all(isinstance(v, Mapping) or parse_label(v) is not None for v in whole.values())


def _question_id(where: str, record: Any) -> str:
    if not isinstance(record, Mapping):
        raise PublishedRunError(f"{where}: a record must be a JSON object")
    qid = record.get("question_id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid.strip():
        raise PublishedRunError(f"{where}: field 'question_id': missing or not a string")
    return qid.strip()


def parse_label(value: Any) -> bool | None:
    """A verdict as the field writes it: a bool, 1/0, or yes/no, true/false, correct/incorrect
    in any case. None when it is none of these."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, float) and value in (0.0, 1.0):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower().rstrip(".")
        if word in _YES:
            return True
        if word in _NO:
            return False
    return None


def label_of(where: str, record: Mapping[str, Any]) -> tuple[bool | None, str | None]:
    """(verdict, judge model) of a record; (None, None) when it carries no verdict field."""
    for name in LABEL_FIELDS:
        if name not in record:
            continue
        raw, model = record[name], None
        if isinstance(raw, Mapping):  # evaluate_qa.py: {"model": ..., "label": ...}
            model = raw.get("model") if isinstance(raw.get("model"), str) else None
            raw = raw.get("label")
            name = f"{name}.label"
        verdict = parse_label(raw)
        if verdict is None:
            raise PublishedRunError(
                f"{where}: field {name!r}: {raw!r} is not a verdict (a bool, 1/0, or yes/no)"
            )
        return verdict, model
    return None, None


def _answer_field(where: str, record: Mapping[str, Any], chosen: str | None) -> str:
    if chosen is not None:
        if chosen not in record:
            raise PublishedRunError(f"{where}: field {chosen!r} (--answer-field): missing")
        return chosen
    for name in ANSWER_FIELDS:
        if name in record:
            return name
    suffixed = [k for k in record if k.endswith(ANSWER_SUFFIXES)]
    if len(suffixed) == 1:
        return suffixed[0]
    raise PublishedRunError(
        f"{where}: no answer field (looked for {', '.join(ANSWER_FIELDS)}); the record has "
        f"{', '.join(map(repr, record))}: name it with --answer-field"
    )


def load_published_run(
    path: str | Path, labels: str | Path | None = None, *, answer_field: str | None = None
) -> PublishedRun:
    """Every answer of a published run, with its verdict from the run file itself or from
    `labels` (joined on question_id; a verdict in the labels file wins)."""
    run_path = Path(path)
    answers: list[PublishedAnswer] = []
    seen: dict[str, str] = {}
    field_used = answer_field
    for where, record in _records(run_path):
        qid = _question_id(where, record)
        if qid in seen:
            raise PublishedRunError(f"{where}: question {qid!r} answered twice (also {seen[qid]})")
        seen[qid] = where
        field_used = _answer_field(where, record, answer_field or field_used)
        text = record.get(field_used)
        if text is not None and not isinstance(text, str):
            raise PublishedRunError(f"{where}: field {field_used!r}: not a string")
        label, model = label_of(where, record)
        answers.append(PublishedAnswer(question_id=qid, hypothesis=text or "", label=label,
                                       label_model=model, where=where))  # fmt: skip
    if not answers:
        raise PublishedRunError(f"{run_path}: holds no answer")
    run = PublishedRun(str(run_path), _digest(run_path), answers, field_used or "")
    return run if labels is None else _join_labels(run, Path(labels))


def _join_labels(run: PublishedRun, path: Path) -> PublishedRun:
    verdicts: dict[str, tuple[bool, str | None]] = {}
    for where, record in _records(path):
        qid = _question_id(where, record)
        if qid in verdicts:
            raise PublishedRunError(f"{where}: question {qid!r} labelled twice")
        label, model = label_of(where, record)
        if label is None:
            raise PublishedRunError(
                f"{where}: no verdict field (looked for {', '.join(LABEL_FIELDS)})"
            )
        verdicts[qid] = (label, model)
    answered = {a.question_id for a in run.answers}
    if not answered & set(verdicts):
        raise PublishedRunError(
            f"{path}: no question id in common with {run.path} (joined on question_id)"
        )
    joined = [
        a.model_copy(update={"label": verdicts[a.question_id][0],
                             "label_model": verdicts[a.question_id][1] or a.label_model})
        if a.question_id in verdicts else a.model_copy(update={"label": None})
        for a in run.answers
    ]  # fmt: skip
    return PublishedRun(
        run.path,
        run.sha256,
        joined,
        run.answer_field,
        labels_path=str(path),
        labels_sha256=_digest(path),
        unlabelled=sorted(answered - set(verdicts)),
        labels_without_answer=sorted(set(verdicts) - answered),
    )


def load_question_set(path: str | Path) -> QuestionSet:
    """The questions of a LongMemEval file or a references file (JSON array or JSONL of
    records with question_id, question, answer, question_type; other fields are ignored)."""
    p = Path(path)
    out: dict[str, Question] = {}
    for where, record in _records(p):
        qid = _question_id(where, record)
        if qid in out:
            raise PublishedRunError(f"{where}: question {qid!r} given twice")
        missing = [f for f in ("question", "answer", "question_type") if f not in record]
        if missing:
            raise PublishedRunError(f"{where}: field {missing[0]!r}: missing")
        answer = record["answer"]
        out[qid] = Question(
            question_id=qid,
            question=str(record["question"]),
            answer=str(answer) if not isinstance(answer, str) else answer,
            question_type=str(record["question_type"]),
        )
    if not out:
        raise PublishedRunError(f"{p}: holds no question")
    return QuestionSet(str(p), _digest(p), out)


def pinned_question_set() -> QuestionSet | None:
    """The pinned LongMemEval_S file's questions when the file is on this machine (the Hugging
    Face cache), sha256 checked; None when it is not (nothing is downloaded here)."""
    from huggingface_hub import try_to_load_from_cache

    from eval_pipeline.corpus.upstream import (
        HF_DEFAULT_VARIANT,
        HF_FILES,
        HF_REPO_ID,
        HF_REVISION,
        UpstreamSpec,
        resolve_upstream,
    )

    file_name = HF_FILES[HF_DEFAULT_VARIANT][0]
    try:
        cached = try_to_load_from_cache(
            HF_REPO_ID, file_name, revision=HF_REVISION, repo_type="dataset"
        )
    except Exception:  # noqa: BLE001 - an unreadable cache is a cache without the file
        return None
    if not isinstance(cached, str):
        return None
    resolved = resolve_upstream(UpstreamSpec(source="huggingface"))
    return load_question_set(resolved.path)


@dataclass(frozen=True)
class Matched:
    """A run's answers matched to its question set."""

    pairs: list[tuple[Question, PublishedAnswer]]
    missing: list[str]  # questions of the set the run does not answer
    n_questions: int


def match_questions(run: PublishedRun, questions: QuestionSet) -> Matched:
    """Each answer with its question; an id outside the set is refused (one line naming it
    and how many more), questions the run leaves out are listed, never scored."""
    outside = [a for a in run.answers if a.question_id not in questions.questions]
    if outside:
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        raise PublishedRunError(
            f"{outside[0].where}: question {outside[0].question_id!r} is not in the question "
            f"set {questions.path}{more}"
        )
    answered = {a.question_id for a in run.answers}
    return Matched(
        pairs=[(questions.questions[a.question_id], a) for a in run.answers],
        missing=sorted(set(questions.questions) - answered),
        n_questions=len(questions),
    )


def looks_published(path: str | Path) -> bool:
    """Whether a file's first record is a published run's (`question_id`), not a label
    file's (`id`)."""
    try:
        for _, record in _records(Path(path)):
            return isinstance(record, Mapping) and "question_id" in record and "id" not in record
    except PublishedRunError:
        return False
    return False


@dataclass(frozen=True)
class LabelledRun:
    """A published run as a label set (`judge_labels.LabelSet`), and what was left out."""

    labels: Any  # judge_labels.LabelSet: one item per answer that carries a verdict
    run: PublishedRun
    questions: QuestionSet
    missing: list[str]  # questions of the set the run does not answer
    unlabelled: list[str]  # answers with no verdict

    def notes(self) -> list[str]:
        """One line per thing a reader of the figures must know."""
        out = []
        models = self.run.label_models
        out.append(
            f"labels by {', '.join(models)} (as the file names them)"
            if models
            else "labels: the file names no judge model"
        )
        if self.missing:
            out.append(
                f"answers {len(self.run.answers)} of the {len(self.questions)} questions of "
                f"{self.questions.path}: {len(self.missing)} left out (e.g. {self.missing[0]})"
            )
        if self.unlabelled:
            out.append(
                f"{len(self.unlabelled)} answer(s) carry no verdict and are left out (e.g. "
                f"{self.unlabelled[0]})"
            )
        return out


def as_label_set(run: PublishedRun, questions: QuestionSet) -> LabelledRun:
    """Each labelled answer as a label item: the question, its reference and type from the
    question set, the abstention flag from the id (LongMemEval's `_abs`), the answer as the
    response (empty when the run gave none), the run's verdict as the label."""
    from eval_pipeline.corpus.judge_labels import LabelItem, LabelSet

    matched = match_questions(run, questions)
    items = []
    unlabelled = []
    for question, answer in matched.pairs:
        if answer.label is None:
            unlabelled.append(answer.question_id)
            continue
        items.append(
            LabelItem(
                id=question.question_id,
                tier=1,
                question_type=question.question_type,
                abstention=question.abstention,
                question=question.question,
                reference=question.answer,
                response=answer.hypothesis,
                label="yes" if answer.label else "no",
            )
        )
    if not items:
        raise PublishedRunError(f"{run.path}: no answer carries a verdict to measure against")
    digest = hashlib.sha256(f"{run.sha256}:{run.labels_sha256 or ''}".encode()).hexdigest()
    shown = run.path if run.labels_path is None else f"{run.path} + {run.labels_path}"
    return LabelledRun(
        LabelSet(path=shown, sha256=digest, items=items),
        run,
        questions,
        matched.missing,
        unlabelled,
    )
