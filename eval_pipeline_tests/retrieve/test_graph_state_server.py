"""The graph-state fingerprint hashed by the server (issue 18): same coverage as the client-side
scan, in slices, and any write still changes it."""

from __future__ import annotations

import pytest

from eval_pipeline.graph import state as gs
from eval_pipeline.graph.store import GraphStore


def test_arcadedb_hashes_server_side_and_counts_like_the_client_scan(scratch_store: GraphStore):
    assert gs.server_hashes(scratch_store)
    server = gs.graph_state(scratch_store)
    client = gs.graph_state(scratch_store, server_side=False)
    assert (server.method, client.method) == ("server", "client")
    assert (server.nodes, server.relationships) == (client.nodes, client.relationships)
    assert server.nodes > 0 and server.relationships > 0
    assert server.schema_fingerprint == client.schema_fingerprint
    # Each path has its own domain: their fingerprints are never mistaken for each other.
    assert server.fingerprint != client.fingerprint
    assert gs.graph_state(scratch_store).fingerprint == server.fingerprint


@pytest.mark.parametrize("slice_elements", [1, 3, 1_000_000])
def test_every_change_is_seen_whatever_the_slicing(
    scratch_store: GraphStore, monkeypatch: pytest.MonkeyPatch, slice_elements: int
):
    monkeypatch.setattr(gs, "SLICE_ELEMENTS", slice_elements)
    base = gs.graph_state(scratch_store)
    assert base.method == "server"
    changes = [
        ("MATCH (t:Turn {turn_id: 's_dog#1'}) SET t.text = t.text + '!'", True),
        (
            "MATCH (t:Turn {turn_id: 's_dog#1'}) SET t.text = substring(t.text, 0, "
            "size(t.text) - 1)",
            False,
        ),  # back to the base content
        ("MATCH ()-[r:NEXT]->(b:Turn {turn_id: 's_dog#1'}) SET r.w = 1", True),
        ("MATCH ()-[r:NEXT]->(b:Turn {turn_id: 's_dog#1'}) REMOVE r.w", False),
    ]
    for statement, changed in changes:
        scratch_store.write(statement)
        now = gs.graph_state(scratch_store)
        assert (now.content_fingerprint != base.content_fingerprint) is changed, statement
        assert (now.nodes, now.relationships) == (base.nodes, base.relationships)


def test_a_reader_without_hash_functions_falls_back_to_the_client_scan(
    scratch_store: GraphStore,
):
    class NoApoc:
        dialect = scratch_store.dialect
        database = scratch_store.database

        def http(self):
            return scratch_store.http()

        def read(self, query, params=None, **kwargs):
            if "apoc." in query:
                raise RuntimeError("Unknown function apoc.util.sha256")
            return scratch_store.read(query, params, **kwargs)

    reader = NoApoc()
    assert not gs.server_hashes(reader)  # type: ignore[arg-type]
    state = gs.graph_state(reader)  # type: ignore[arg-type]
    assert state.method == "client"
    assert state.fingerprint == gs.graph_state(scratch_store, server_side=False).fingerprint


def test_a_node_with_two_labels_is_counted_once(scratch_store: GraphStore):
    base = gs.graph_state(scratch_store)
    scratch_store.write("MATCH (t:Turn {turn_id: 's_dog#1'}) SET t:Extra")
    server = gs.graph_state(scratch_store)
    client = gs.graph_state(scratch_store, server_side=False)
    assert server.content_fingerprint != base.content_fingerprint
    assert server.nodes == client.nodes == base.nodes
