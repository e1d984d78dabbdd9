"""The ingest schema a memory system declares: the evidence policy, the injection schema it
builds on, and what its pins carry."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from eval_pipeline.graph import schema as graph_schema
from eval_pipeline.memory_system import NAMESPACED_SCHEMA, SESSION_SCHEMA, IngestSchema


@pytest.mark.parametrize(
    "field",
    [
        {"labels": ("Note", "AnswerSession")},
        {"relationship_types": ("HAS_ANSWER",)},
        {"properties": ("holds_evidence",)},
        {"provenance": (("Note", "is_evidence", "FROM_TURN"),)},
    ],
)
def test_a_schema_declaring_an_evidence_marker_is_refused(field):
    with pytest.raises(ValidationError, match="declares evidence markers"):
        IngestSchema(name="leaky", version="1", **field)


def test_a_schema_must_build_on_this_pipelines_injection_schema():
    with pytest.raises(ValidationError, match="builds on injection schema"):
        IngestSchema(name="x", version="1", injection_schema=graph_schema.SCHEMA_VERSION + 1)
    with pytest.raises(ValidationError, match="searchable kinds"):
        IngestSchema(name="x", version="1", searchable=("entity",))


def test_pins_name_the_version_and_change_with_any_declaration():
    pins = SESSION_SCHEMA.pins()
    assert pins["version"] == "2" and pins["injection_schema"] == graph_schema.SCHEMA_VERSION
    other = IngestSchema(name=SESSION_SCHEMA.name, version="2", searchable=("fact",))
    assert other.pins()["digest"] != pins["digest"]
    assert NAMESPACED_SCHEMA.searchable_labels() == {"Chunk", "Fact", "Episode"}
    assert other.searchable_labels() == {"Fact"}
