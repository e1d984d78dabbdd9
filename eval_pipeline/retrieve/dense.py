"""`dense` and `hybrid`: retrieval by meaning, on the bundled embedder and the graph's own
vector index; and the two fused.

Sources are `fulltext`'s: what the memory under test declares searchable (chunks, facts,
episodes; turns for `none`), each node's text embedded as an e5 `passage:` (`embed.py`) into
its `embedding` property by the preparation step (`graph/vectors.py`, run by the retrieval
stage before its read fingerprint: `prepare_graph`). A retriever only reads: the question is
embedded as an e5 `query:` in this process, and

- scope `question` scores the question's haystack exactly: the cosine similarity of every
  embedded node of its sessions (a few hundred; for facts, of its namespace only), computed
  by the server (`Dialect.vector_similarity`), top k by similarity. The protocol is to
  search within the haystack, and an approximate index over every user's nodes would need a
  fetch hundreds of times k to be sure of k inside one haystack;
- scope `batch` asks the server's vector index (`Dialect.vector_call`: ArcadeDB's
  LSM_VECTOR, Memgraph's `vector_search`) for the k nearest of each source.

Each source's top k are merged by similarity and ranked as `fulltext` ranks (covered turns
and chunks dropped, a superseded fact after its successor). A graph without the vector
index of a source that has text is refused when the retriever is built, in one line.

`hybrid` fuses the two rankings by reciprocal rank fusion (`fusion.py`, k = 60): the top
`depth` candidates of `fulltext` and of `dense` for the same question and scope, each
scored sum(1 / (60 + rank)), then ranked and cut to k like the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval_pipeline import embed
from eval_pipeline.graph.dialects.base import quote_name
from eval_pipeline.graph.errors import GraphError
from eval_pipeline.graph.vectors import EMBEDDING_PROPERTY, VectorSource, prepare_vectors
from eval_pipeline.reconcile.namespace import namespace_of
from eval_pipeline.retrieve import fulltext_queries as ftq
from eval_pipeline.retrieve.fulltext import FulltextRetriever
from eval_pipeline.retrieve.fusion import RRF_K, reciprocal_rank_fusion
from eval_pipeline.retrieve.guarded_read import GuardedReader
from eval_pipeline.retrieve.protocol import (
    RetrievalEnv,
    RetrievalOutput,
    RetrievalRequest,
    RetrievalTrace,
)
from eval_pipeline.retrieve.readonly_guard import (
    DEFAULT_ALLOWED_FUNCTIONS,
    DEFAULT_ALLOWED_PROCEDURES,
    VECTOR_FUNCTIONS,
    VECTOR_PROCEDURES,
)

Candidate = tuple[ftq.SourceKind, dict]
HYBRID_DEPTH = 50  # candidates taken from each ranking before fusion


class DenseIndexMissing(ValueError):
    """The graph has text to search but no vector index over it (never prepared)."""


def _source(kind: str) -> ftq.SourceKind:
    return next(s for s in ftq.SOURCE_KINDS if s.kind == kind)


def vector_sources(kinds: list[str]) -> list[VectorSource]:
    """What the preparation step embeds for these retrieval kinds."""
    return [
        VectorSource(s.label, s.text_property, s.id_property)
        for s in ftq.SOURCE_KINDS
        if s.kind in kinds
    ]


def search_statement(dialect: Any, source: ftq.SourceKind, *, scoped: bool) -> str:
    """Top `$k` of one source by cosine similarity to `$vector`: exact over the sessions in
    `$haystack` (and, for facts, namespace `$namespace`) when scoped, else the vector index
    `$index`. Rows as `fulltext_queries.search_statement`'s (`score` = similarity)."""
    order = f"WITH node, score ORDER BY score DESC, node.{source.id_property} ASC LIMIT $k\n"
    if scoped:
        similarity = dialect.vector_similarity(f"node.{EMBEDDING_PROPERTY}", "$vector")
        head = (
            f"MATCH (node:{quote_name(source.label)})\n"
            f"WHERE {ftq.scope_condition(source)} AND node.{EMBEDDING_PROPERTY} IS NOT NULL\n"
            f"WITH node, {similarity} AS score\n"
        )
    else:
        head = f"{dialect.vector_call()}\n"
    return f"{head}{order}{ftq._tail(source)}"


class DenseRetriever(FulltextRetriever):
    name = "dense"
    version = 1

    def __init__(
        self,
        env: RetrievalEnv,
        *,
        sources: str | list[str] = "auto",
        context_format: str = "dated",
        query_embedder: Callable[[list[str]], Any] = embed.embed_queries,
    ) -> None:
        """`sources`: "auto" (what the memory declares searchable, among the labels with
        text) or a list of kinds; `context_format` as `fulltext`'s. Refuses, in one line, a
        graph whose searched sources have text but no vector index (`check_graph`)."""
        super().__init__(env, sources=sources, context_format=context_format)
        self.reader = GuardedReader(
            env.store,
            timeout_s=env.query_timeout_s,
            max_rows=env.max_rows,
            allowed_procedures=DEFAULT_ALLOWED_PROCEDURES | VECTOR_PROCEDURES,
            allowed_functions=DEFAULT_ALLOWED_FUNCTIONS | VECTOR_FUNCTIONS,
        )
        self.embed_query = query_embedder
        self.embedder = embed.identity()

    def check_graph(self) -> None:
        """Refuse, in one line (DenseIndexMissing), a graph that cannot serve this retriever:
        called by the retrieval stage once, before the first question (construction must not
        touch the graph: the preflight builds retrievers before any graph is ready)."""
        self.sources()

    @classmethod
    def prepare_graph(
        cls, store: Any, options: dict[str, Any], note: Callable[[str], None]
    ) -> dict[str, Any]:
        """The write step before retrieval: embed the sources' texts into the graph and
        index them (`graph/vectors.py`), cached by text hash. Never called by a read."""
        wanted = options.get("sources", "auto")
        kinds = sorted(_declared_of(store)) if wanted == "auto" else list(wanted)
        return prepare_vectors(store, vector_sources(kinds), cache=embed.PassageCache(), note=note)

    # --- sources ------------------------------------------------------------------------

    def sources(self) -> list[ftq.FulltextSource]:
        if self._sources is None:
            store: Any = self.env.store
            try:
                indexed = {
                    i.label: i.name
                    for i in self.dialect.vector_indexes(store)
                    if i.prop == EMBEDDING_PROPERTY
                }
            except (GraphError, AttributeError) as exc:
                raise DenseIndexMissing(
                    f"dense: cannot list the graph's vector indexes: {exc}"
                ) from None
            kinds = self._declared() if self.wanted == ["auto"] else set(self.wanted)
            found: list[ftq.FulltextSource] = []
            for source in ftq.SOURCE_KINDS:
                if source.kind not in kinds:
                    continue
                if source.label in indexed:
                    found.append(ftq.FulltextSource(source, indexed[source.label]))
                elif self.wanted != ["auto"] or self._has_text(source):
                    raise DenseIndexMissing(
                        f"dense: {source.label}.{source.text_property} has no vector index "
                        f"over {source.label}.{EMBEDDING_PROPERTY} in the graph: the retrieval "
                        "stage embeds it before it reads (eval-pipeline run --retriever dense)"
                    )
            if not found:
                raise DenseIndexMissing(
                    f"dense: nothing to search: no vector index over any of {sorted(kinds)}"
                )
            self._sources = found
        return self._sources

    def _has_text(self, source: ftq.SourceKind) -> bool:
        rows = self.env.store.read(
            f"MATCH (n:{quote_name(source.label)}) WHERE n.{source.text_property} IS NOT NULL "
            "RETURN 1 AS one LIMIT 1",
            {},
            timeout_s=self.env.query_timeout_s,
            max_rows=1,
        )
        return bool(rows)

    # --- retrieval ----------------------------------------------------------------------

    def query_vector(self, question: str) -> list[float]:
        return [float(x) for x in self.embed_query([question])[0]]

    def candidates(
        self, request: RetrievalRequest, trace: RetrievalTrace, k: int
    ) -> list[Candidate] | None:
        sources = self.sources()
        if not request.question.strip():
            trace.note("the question is empty")
            return None
        haystack = self.scope_of(request, trace)
        vector = self.query_vector(request.question)
        out: list[Candidate] = []
        for source in sources:
            params: dict[str, Any] = {"vector": vector, "k": k, "index": source.index}
            if haystack is not None:
                params["haystack"] = haystack
                params["namespace"] = namespace_of(request.question_id)
            statement = search_statement(self.dialect, source.source, scoped=haystack is not None)
            rows = self.reader.read(statement, params, trace=trace, max_rows=k)
            if trace.queries:  # the record keeps what the vector was, not its 384 floats
                trace.queries[-1].params["vector"] = f"query embedding ({len(vector)} dims)"
            out.extend((source.source, row) for row in rows)
        return out

    def pins(self) -> dict[str, Any]:
        return {
            **self.common_pins(),
            "search": {
                "question": "exact cosine over the haystack",
                "batch": "the server's vector index",
            },
            "embedder": self.embedder,
        }


class HybridRetriever:
    """`fulltext` and `dense` fused by reciprocal rank fusion (see the module)."""

    name = "hybrid"
    version = 2  # 2: its full-text side ranks within the haystack (fulltext's new default)

    def __init__(
        self,
        env: RetrievalEnv,
        *,
        sources: str | list[str] = "auto",
        context_format: str = "dated",
        depth: int = HYBRID_DEPTH,
        rrf_k: int = RRF_K,
        query_embedder: Callable[[list[str]], Any] = embed.embed_queries,
        **fulltext_options: Any,
    ) -> None:
        """`depth`: candidates taken from each ranking; `rrf_k`: the fusion constant; other
        options go to the full-text side (`max_terms`, `stemming`, ...)."""
        if depth < 1:
            raise ValueError("hybrid: depth must be >= 1")
        if rrf_k < 0:
            raise ValueError("hybrid: rrf_k must be >= 0")
        self.lexical = FulltextRetriever(
            env, sources=sources, context_format=context_format, **fulltext_options
        )
        self.semantic = DenseRetriever(
            env, sources=sources, context_format=context_format, query_embedder=query_embedder
        )
        self.depth = depth
        self.rrf_k = rrf_k

    prepare_graph = DenseRetriever.prepare_graph

    def check_graph(self) -> None:
        self.semantic.check_graph()

    def retrieve(self, request: RetrievalRequest, trace: RetrievalTrace) -> RetrievalOutput:
        depth = max(self.depth, request.top_k)
        rankings = [
            _ranked_candidates(side.candidates(request, trace, depth) or [], depth)
            for side in (self.lexical, self.semantic)
        ]
        fused = reciprocal_rank_fusion(
            rankings, key=lambda c: (c[0].kind, str(c[1]["id"])), k=self.rrf_k
        )
        candidates = [(source, {**row, "score": score}) for (source, row), score in fused]
        return self.lexical.ranked(candidates, request.top_k, trace)

    def pins(self) -> dict[str, Any]:
        return {
            "retriever": self.name,
            "version": self.version,
            "fusion": {"method": "reciprocal rank fusion", "k": self.rrf_k, "depth": self.depth},
            "fulltext": self.lexical.pins(),
            "dense": self.semantic.pins(),
            "embedder": self.semantic.embedder,
        }


def _ranked_candidates(candidates: list[Candidate], depth: int) -> list[Candidate]:
    """One ranking of a retriever's candidates from all its sources: score descending, then
    kind and id (as `FulltextRetriever._rank` orders them), the best `depth`."""
    order = {kind: i for i, kind in enumerate(ftq.KINDS)}
    ranked = sorted(
        candidates,
        key=lambda c: (-float(c[1].get("score") or 0.0), order[c[0].kind], str(c[1]["id"])),
    )
    return ranked[:depth]


def _declared_of(store: Any) -> set[str]:
    from eval_pipeline.reconcile.reader import declared_searchable, memory_census

    try:
        configurations = memory_census(store)["configurations"]
    except (GraphError, AttributeError, KeyError, TypeError):
        configurations = []
    return declared_searchable(configurations)
