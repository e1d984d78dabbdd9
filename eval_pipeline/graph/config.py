"""`StoreConfig`: where the evaluation graph is and how the store talks to it.

Plain pydantic, no connection: the store (`store.GraphStore`) is this configuration plus a
driver, and the Dagster layer builds one from its resource's fields. A refused URL is never
echoed back (`hide_input_in_errors`): URLs end up in run storage and logs.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eval_pipeline.corpus.batches import BatchKey
from eval_pipeline.graph import server
from eval_pipeline.graph.errors import GraphError

# In a graph URI: one instance per question batch, `{batch}` being its number (1-based).
BATCH_PLACEHOLDER = "{batch}"


class StoreConfig(BaseModel):
    """Bolt access to the evaluation graph (embedded ArcadeDB by default, or Memgraph)."""

    # Frozen: a store's claim and wipe decisions rest on these values not changing under it.
    model_config = ConfigDict(hide_input_in_errors=True, extra="forbid", frozen=True)

    backend: str = Field(default="arcadedb", description="arcadedb or memgraph")
    uri: str | None = Field(
        default=None, description="bolt://host:port; unset = the embedded ArcadeDB server"
    )
    database: str = Field(default="eval", description="database name on the server")
    user: str | None = Field(default=None, description="from EVAL_GRAPH_USER")
    password: str | None = Field(default=None, description="from EVAL_GRAPH_PASSWORD")
    http_url: str | None = Field(
        default=None, description="ArcadeDB HTTP API of an external server (index creation)"
    )
    batch_uri: str | None = Field(
        default=None,
        description="bolt URI of the instance of each question batch, {batch} its number "
        "(a run over K > 1 batches); unset: `uri` itself names one per batch",
    )
    disposable: bool = Field(
        default=False, description="allow wiping a non-empty instance the pipeline never claimed"
    )
    lease_wait_s: float = Field(
        default=0.0,
        ge=0.0,
        description="how long a chain waits for another chain's lease on the instance "
        "before it is refused (0: refuse at once, naming the holder)",
    )
    data_dir: str | None = Field(
        default=None, description="embedded server directory; unset = state_dir()/graph/arcadedb"
    )
    heap: str = Field(default="1g", description="embedded server JVM heap (-Xmx)")
    batch_turns: int = Field(default=2000, description="turns per injection statement")
    batch_bytes: int = Field(
        default=8 * 1024 * 1024,
        description="bytes per Bolt message, max (keep under the server's limit: 16 MiB by "
        "default on ArcadeDB, where an oversize message hangs the client)",
    )

    @field_validator("uri", "http_url", "batch_uri")
    @classmethod
    def _no_credentials_in_urls(cls, value: str | None) -> str | None:
        # A URL is stored in Dagster's run storage and logs: credentials never go in one.
        if value is not None and (urlsplit(value).username or urlsplit(value).password):
            raise ValueError(
                "the graph URL must not carry credentials; set EVAL_GRAPH_USER and "
                "EVAL_GRAPH_PASSWORD in the environment instead"
            )
        return value

    @property
    def embedded(self) -> bool:
        return self.uri is None

    def batch_template(self, batches: int) -> str | None:
        """The URI naming each batch's instance with {batch}: `uri` when it holds the
        placeholder, else `batch_uri` for a run over several batches; None: embedded servers
        (several batches) or this instance itself (one)."""
        if BATCH_PLACEHOLDER in (self.uri or ""):
            return self.uri
        if batches > 1 and self.batch_uri:
            return self.batch_uri
        return None

    def batch_config(self, batch: BatchKey) -> StoreConfig | None:
        """The configuration of question batch `batch`'s instance; None when it is this one
        (a run of one batch). Otherwise the batch URI with `{batch}` replaced by the batch
        number (in the HTTP URL too), or an embedded server of its own (`<data dir>-batchNN`).
        Batches never share an instance: each wipes its own before injecting."""
        template = self.batch_template(batch.batches)
        if template is None and batch.batches == 1:
            return None
        if template is None and not self.embedded:
            raise GraphError(
                f"{batch.batches} question batches need one graph instance each: put "
                f"{BATCH_PLACEHOLDER} in the graph URI (e.g. bolt://memgraph-{{batch}}:7687)"
            )
        number = str(batch.index)
        values = self.config_values()
        if template is None:  # embedded: a server of its own per batch
            root = server.resolve_data_dir(self.data_dir)
            values["data_dir"] = str(root.with_name(f"{root.name}-batch{batch.index:02d}"))
        else:
            values["uri"] = template.replace(BATCH_PLACEHOLDER, number)
            values["batch_uri"] = None
            if self.http_url:
                values["http_url"] = self.http_url.replace(BATCH_PLACEHOLDER, number)
        return StoreConfig(**values)

    def config_values(self) -> dict[str, object]:
        """The configured values by field name (what `StoreConfig(**values)` takes back)."""
        return {name: getattr(self, name) for name in StoreConfig.model_fields}
