"""`fulltext`: the offline default retriever. Lexical BM25, top-k, within the haystack.

Query: the question's content words (stopwords dropped, at most `max_terms` of them), each
expanded into its English word forms (`terms.word_forms`: the word, its Snowball stem and the
stem's common inflections, bounded per word), Lucene-escaped, as one disjunction. The
expansion is on the query side so "marathons" finds "marathon" on every backend, whatever its
index analyzer; `stemming=False` searches the bare words (version 1's query).
Sources: what the memory under test declares searchable (`IngestSchema.searchable`, read
from the graph's memory registry) among the full-text indexes the graph has (found once per
run): chunks, facts, episodes; turns only for a memory that is the transcript (`none`). A
graph with no registered memory (built by hand) is searched as it is. Each source yields its
own top k; the merged list is ranked by score and cut to k, dropping a turn or chunk whose
turns are all already covered by a better-ranked one (a chunk repeats part of its turn).
Scope `question` keeps only sessions of the question's haystack, scope `batch` searches every
session in the graph.
Ranking (`ranking`): "haystack", the default (scope `question` only; `batch` asks the
engine), reads the question's own haystack nodes of each source and ranks them by BM25 with
the haystack's own statistics (`retrieve.haystack_bm25`, pinned), which does not grow with the
graph; "engine" asks the full-text index, across the whole graph, and keeps the hits in scope.
Facts with history (a reconciler that supersedes, e.g. `consolidating`): a superseded fact is
still retrieved, as history, but its current successor (fetched when the search missed it) is
always ranked before it, and so before a turn or chunk that only says what it said; the
reader sees it labelled "superseded".
"""

from __future__ import annotations

import logging
from typing import Any

from eval_pipeline.graph.errors import GraphError
from eval_pipeline.reconcile.namespace import namespace_of
from eval_pipeline.reconcile.reader import declared_searchable, memory_census
from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve import haystack_bm25
from eval_pipeline.retrieve.guarded_read import GuardedReader
from eval_pipeline.retrieve.protocol import (
    RetrievalEnv,
    RetrievalError,
    RetrievalOutput,
    RetrievalRequest,
    RetrievalTrace,
)
from eval_pipeline.retrieve.results import RetrievedItem
from eval_pipeline.retrieve.terms import (
    MAX_FORMS_PER_WORD,
    STEMMER,
    STEMMER_PACKAGE,
    content_terms,
    expand_terms,
    or_query,
)

log = logging.getLogger(__name__)

CONTEXT_FORMATS = ("dated", "text")
RANKINGS = ("engine", "haystack")
HAYSTACK_MAX_ROWS = 100_000
MAX_SUCCESSOR_HOPS = 8  # a fact superseded more often than this is shown without the rest


class FulltextRetriever:
    name = "fulltext"
    # 2: query terms expanded into English word forms (Snowball stem + inflections).
    # 3: facts of the question's namespace only; current facts before the ones they superseded.
    # 4: sources are what the memory under test declares searchable.
    version = 5  # 5: ranking `haystack` is the default (the ranking is always pinned)

    def __init__(
        self,
        env: RetrievalEnv,
        *,
        sources: str | list[str] = "auto",
        context_format: str = "dated",
        max_terms: int = 32,
        stemming: bool = True,
        max_forms_per_word: int = MAX_FORMS_PER_WORD,
        ranking: str = "haystack",
    ) -> None:
        """`sources`: "auto" (turns plus whatever else is indexed), or a list of kinds
        (turn, chunk, fact, episode). `context_format`: "dated" prefixes each context string
        with its date and speaker (the reader needs dates for temporal questions), "text" hands
        over the bare text. `max_terms` bounds the distinct question words searched;
        `stemming` expands each into at most `max_forms_per_word` word forms. `ranking`:
        "engine" (the full-text index) or "haystack" (BM25 over the question's haystack)."""
        if env.backend not in ftq.BACKENDS:
            raise ValueError(
                f"fulltext retriever: no full-text query for backend {env.backend!r}; "
                f"known: {', '.join(ftq.BACKENDS)}"
            )
        # Every backend-specific statement comes from the dialect (the store's own, which
        # knows the server's version, when it has one).
        self.dialect = ftq.dialect_for(env.backend, env.store)
        if ranking not in RANKINGS:
            raise ValueError(f"fulltext ranking must be one of {RANKINGS}, not {ranking!r}")
        self.ranking = ranking
        if context_format not in CONTEXT_FORMATS:
            raise ValueError(f"context_format must be one of {CONTEXT_FORMATS}")
        wanted = ["auto"] if sources == "auto" else list(sources)
        unknown = sorted(set(wanted) - set(ftq.KINDS) - {"auto"})
        if unknown:
            raise ValueError(f"unknown fulltext sources {unknown}; known: {list(ftq.KINDS)}")
        self.env = env
        self.backend = env.backend
        self.wanted = wanted
        self.context_format = context_format
        self.max_terms = max_terms
        if max_forms_per_word < 1:
            raise ValueError("max_forms_per_word must be >= 1")
        self.stemming = bool(stemming)
        self.max_forms_per_word = max_forms_per_word
        self.reader = GuardedReader(env.store, timeout_s=env.query_timeout_s, max_rows=env.max_rows)
        self._sources: list[ftq.FulltextSource] | None = None
        self._discovery_note: str | None = None

    # --- sources ------------------------------------------------------------------------

    def sources(self) -> list[ftq.FulltextSource]:
        """The indexed sources searched, discovered on first use (the graph is fixed by then)."""
        if self._sources is None:
            found = self._discover()
            by_kind = {s.source.kind: s for s in found}
            declared = self._declared()
            wants_turns = "turn" in declared or "turn" in self.wanted
            if wants_turns and "turn" not in by_kind:  # a missing index fails loudly
                by_kind["turn"] = ftq.turn_source(self.backend)
            if self.wanted == ["auto"]:
                # What the memory under test declares searchable, of what is indexed.
                kinds = [k for k in ftq.KINDS if k in by_kind and k in declared]
            else:
                missing = [k for k in self.wanted if k not in by_kind]
                if missing:
                    raise RetrievalError(
                        f"fulltext sources {missing} have no full-text index in the graph"
                    )
                kinds = [k for k in ftq.KINDS if k in self.wanted]
            self._sources = [by_kind[k] for k in kinds]
        return self._sources

    def _declared(self) -> set[str]:
        """The kinds the memory in the graph declares searchable (`IngestSchema.searchable`,
        the union over the configurations that made its sessions). A graph no reconciler
        registered memory in (one built by hand) is searched as it is: every indexed kind."""
        store: Any = self.env.store
        try:
            configurations = memory_census(store)["configurations"]
        except (GraphError, AttributeError, KeyError, TypeError):  # a reader without it
            configurations = []
        return declared_searchable(configurations)

    def _discover(self) -> list[ftq.FulltextSource]:
        store: Any = self.env.store
        try:
            return ftq.sources_from_indexes(self.dialect.text_indexes(store))
        except (GraphError, AttributeError) as exc:  # a reader that cannot list indexes
            self._discovery_note = f"full-text index discovery failed, searching turns only: {exc}"
            log.warning("%s", self._discovery_note)
        return []

    # --- retrieval ----------------------------------------------------------------------

    def terms(self, question: str) -> list[str]:
        """The distinct content words of the question (at most `max_terms`)."""
        return content_terms(question, max_terms=self.max_terms)

    def query_terms(self, terms: list[str]) -> list[str]:
        """What the query ORs together: the words, or their word forms when stemming."""
        if not self.stemming:
            return list(terms)
        return expand_terms(terms, max_forms=self.max_forms_per_word)

    def haystack(self, question_id: str, trace: RetrievalTrace | None) -> list[str]:
        rows = self.reader.read(
            ftq.HAYSTACK_STATEMENT,
            {"question_id": question_id},
            trace=trace,
            max_rows=HAYSTACK_MAX_ROWS,
        )
        return [str(r["session_id"]) for r in rows]

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> RetrievalOutput:
        candidates = self.candidates(request, trace, request.top_k)
        if candidates is None:
            return RetrievalOutput(items=[], context=[])
        return self.ranked(candidates, request.top_k, trace)

    def ranked(
        self, candidates: list[tuple[ftq.SourceKind, dict]], k: int, trace: RetrievalTrace
    ) -> RetrievalOutput:
        """The output for candidates ranked by their `score`: successors of superseded facts
        added and placed first, covered turns and chunks dropped, cut to k."""
        candidates = candidates + self._successors(candidates, trace)
        items, context = self._rank(candidates, k)
        return RetrievalOutput(items=items, context=context)

    def scope_of(self, request: RetrievalRequest, trace: RetrievalTrace) -> list[str] | None:
        """The question's haystack sessions for scope `question`, None for `batch`."""
        if request.scope != "question":
            return None
        haystack = self.haystack(request.question_id, trace)
        if not haystack:
            raise RetrievalError(
                f"question {request.question_id!r} has no haystack sessions in the graph "
                "(was it injected with this batch?)"
            )
        return haystack

    def candidates(
        self, request: RetrievalRequest, trace: RetrievalTrace, k: int
    ) -> list[tuple[ftq.SourceKind, dict]] | None:
        """Each source's top k rows for the question (None: nothing to search for)."""
        sources = self.sources()
        terms = self.terms(request.question)
        if not terms:
            trace.note("the question has no content words to search for")
            return None
        # Ranking `haystack` reads the haystack's nodes themselves: its sessions are asked
        # for only when none was found, to tell "no haystack" from "nothing indexed".
        in_haystack = request.scope == "question" and self.ranking == "haystack"
        haystack = None if in_haystack else self.scope_of(request, trace)
        query_terms = self.query_terms(terms)
        query = or_query(query_terms)
        candidates: list[tuple[ftq.SourceKind, dict]] = []
        documents = 0
        for source in sources:
            if in_haystack:
                rows, read = self._haystack_search(request, source, query_terms, k, trace)
                documents += read
                candidates.extend((source.source, row) for row in rows)
                continue
            # The rows of `ftq.search_statement`, fetched through the engine's bounded call
            # where it has one (issue 18: common words match most of the corpus).
            rows = ftq.search(
                lambda st, p, m: self.reader.read(st, p, trace=trace, max_rows=m),
                self.dialect,
                source,
                query,
                k,
                haystack,
                namespace=namespace_of(request.question_id),
            )
            candidates.extend((source.source, row) for row in rows)
        if in_haystack and not documents:
            self.scope_of(request, trace)  # raises for a question with no haystack sessions
        return candidates

    def _haystack_search(
        self,
        request: RetrievalRequest,
        source: ftq.FulltextSource,
        query_terms: list[str],
        k: int,
        trace: RetrievalTrace,
    ) -> tuple[list[dict], int]:
        """One source's top k within the question's haystack, ranked here (`haystack_bm25`),
        as the engine path's rows (`picked_statement`'s; turns straight from their read), and
        how many nodes were ranked."""
        params: dict[str, Any] = {"question_id": request.question_id}
        if source.source.kind == "fact":
            params["namespace"] = namespace_of(request.question_id)
        found = self.reader.read(
            ftq.haystack_documents_statement(source.source), params, trace=trace, max_rows=1
        )
        docs = [
            dict(zip(ftq.HAYSTACK_DOC_FIELDS, doc, strict=False))
            for doc in (found[0]["docs"] if found else None) or []
        ]
        picked, stats = haystack_bm25.rank(
            [(str(d["id"]), str(d.get("text") or "")) for d in docs], query_terms, k
        )
        # N is the documents read's `rows` in the trace; the whole ranking follows from the
        # pins and the graph's fingerprint.
        log.debug("%s: %s", request.question_id, stats.describe(source.source.kind))
        if not picked or source.source.turn_link is None:
            by_id = {str(d["id"]): d for d in docs}
            return [
                {**by_id[p["id"]], "turn_ids": [p["id"]], "score": p["score"]} for p in picked
            ], len(docs)
        rows = self.reader.read(
            ftq.picked_statement(source.source),
            {"picked": picked},
            trace=trace,
            max_rows=len(picked),
        )
        return rows, len(docs)

    def _successors(
        self, candidates: list[tuple[ftq.SourceKind, dict]], trace: RetrievalTrace
    ) -> list[tuple[ftq.SourceKind, dict]]:
        """The current successors of the superseded facts found, when the search missed them;
        each gets the score of the fact it replaces (so it ranks where that fact would)."""
        have = {str(row["id"]) for source, row in candidates if source.kind == "fact"}
        wanted = {
            str(row["superseded_by"]): float(row.get("score") or 0.0)
            for source, row in candidates
            if source.kind == "fact" and row.get("superseded_by")
        }
        found: list[tuple[ftq.SourceKind, dict]] = []
        for _ in range(MAX_SUCCESSOR_HOPS):
            missing = {i: score for i, score in wanted.items() if i not in have}
            if not missing:
                break
            rows = self.reader.read(ftq.SUCCESSORS_STATEMENT, {"ids": sorted(missing)}, trace=trace)
            wanted = {}
            for row in rows:
                row = {**row, "score": missing.get(str(row["id"]), 0.0)}
                have.add(str(row["id"]))
                found.append((ftq.FACT_SOURCE, row))
                if row.get("superseded_by"):
                    wanted[str(row["superseded_by"])] = row["score"]
        return found

    def _rank(
        self, candidates: list[tuple[ftq.SourceKind, dict]], k: int
    ) -> tuple[list[RetrievedItem], list[str]]:
        order = {kind: i for i, kind in enumerate(ftq.KINDS)}
        candidates.sort(
            key=lambda c: (-float(c[1].get("score") or 0.0), order[c[0].kind], str(c[1]["id"]))
        )
        candidates = current_first(candidates)
        covered: set[str] = set()
        items: list[RetrievedItem] = []
        context: list[str] = []
        for source, row in candidates:
            turn_ids = sorted((str(t) for t in row.get("turn_ids") or [] if t), key=_turn_sort_key)
            # Episodes summarise whole sessions and facts restate what turns said, in other
            # words: they neither hide turns nor get hidden.
            if source.kind not in ("episode", "fact"):
                if turn_ids and covered.issuperset(turn_ids):
                    continue
                covered.update(turn_ids)
            text = str(row.get("text") or "")
            session_id = row.get("session_id")
            sessions = [str(session_id)] if session_id else _sessions_of(turn_ids)
            items.append(
                RetrievedItem(
                    text=text,
                    turn_ids=turn_ids,
                    session_ids=sessions,
                    score=float(row["score"]) if row.get("score") is not None else None,
                    kind=source.kind,
                    node_ids=[] if source.kind == "turn" else [str(row["id"])],
                )
            )
            context.append(self._context_string(text, row))
            if len(items) >= k:
                break
        return items, context

    def _context_string(self, text: str, row: dict) -> str:
        if self.context_format == "text":
            return text
        when = _short_time(row.get("timestamp"))
        who = row.get("role")
        until = row.get("superseded_by") and f"superseded {_short_time(row.get('invalid_at'))}"
        label = ", ".join(str(p) for p in (when, who, until) if p)
        return f"[{label}] {text}" if label else text

    def common_pins(self) -> dict[str, Any]:
        """What every retriever built on this one pins: who it is, where and what it searches."""
        return {
            "retriever": self.name,
            "version": self.version,
            "backend": self.backend,
            "sources": [s.source.kind for s in self.sources()],
            "context_format": self.context_format,
        }

    def pins(self) -> dict[str, Any]:
        return {
            **self.common_pins(),
            "max_terms": self.max_terms,
            "query_expansion": (
                {
                    "stemmer": STEMMER,
                    "package": STEMMER_PACKAGE,
                    "max_forms_per_word": self.max_forms_per_word,
                }
                if self.stemming
                else None
            ),
            "discovery_problem": self._discovery_note,
            # Scope `batch` always asks the engine; the scope is pinned beside this.
            "ranking": (
                dict(haystack_bm25.PINS) if self.ranking == "haystack" else {"ranking": "engine"}
            ),
        }


def current_first(
    candidates: list[tuple[ftq.SourceKind, dict]],
) -> list[tuple[ftq.SourceKind, dict]]:
    """Ranked candidates with outdated ones moved right after what replaced them, when that
    ranked lower: a superseded fact after its successor, and a turn or chunk whose turns are
    only the provenance of superseded facts after the successor of the first such fact. The
    current value is read first; the old one stays, as history."""
    # The candidate tuples themselves (not copies): `emit` tells them apart by identity.
    facts = {str(c[1]["id"]): c for c in candidates if c[0].kind == "fact"}
    current_turns: set[str] = set()
    outdated_turns: dict[str, str] = {}  # turn id → successor fact id
    for _, row in facts.values():
        turns = [str(t) for t in row.get("turn_ids") or [] if t]
        if row.get("superseded_by"):
            for t in turns:
                outdated_turns.setdefault(t, str(row["superseded_by"]))
        else:
            current_turns.update(turns)

    def successor(candidate: tuple[ftq.SourceKind, dict]) -> tuple[ftq.SourceKind, dict] | None:
        source, row = candidate
        if source.kind == "fact":
            return facts.get(str(row.get("superseded_by") or ""))
        if source.kind == "episode":
            return None
        turns = [str(t) for t in row.get("turn_ids") or [] if t]
        if not turns or any(t not in outdated_turns or t in current_turns for t in turns):
            return None
        return facts.get(outdated_turns[turns[0]])

    placed: set[int] = set()
    out: list[tuple[ftq.SourceKind, dict]] = []

    def emit(candidate: tuple[ftq.SourceKind, dict], depth: int = 0) -> None:
        if id(candidate) in placed:
            return
        placed.add(id(candidate))
        after = successor(candidate)
        if after is not None and depth < MAX_SUCCESSOR_HOPS:
            emit(after, depth + 1)
        out.append(candidate)

    for candidate in candidates:
        emit(candidate)
    return out


def _turn_sort_key(turn_id: str) -> tuple[str, int]:
    session, _, index = turn_id.rpartition("#")
    return (session, int(index)) if index.isdigit() else (turn_id, -1)


def _sessions_of(turn_ids: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for tid in turn_ids:
        seen.setdefault(tid.rpartition("#")[0], None)
    return [s for s in seen if s]


def _short_time(value: Any) -> str | None:
    """ "2023-05-30T23:40:03" -> "2023-05-30 23:40": the seconds are the turn's index, not time."""
    if not value:
        return None
    text = str(value).replace("T", " ")
    return text[:16]
