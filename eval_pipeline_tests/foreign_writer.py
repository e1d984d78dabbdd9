"""Someone else writing to the pipeline's graph server: a plain neo4j driver for Cypher and a
plain HTTP client for ArcadeDB's SQL, knowing nothing of the claim (not a GraphStore)."""

from __future__ import annotations

from pathlib import Path

import neo4j

from eval_pipeline.graph import server
from eval_pipeline.graph.arcadedb_http import ArcadeHttp


class Foreigner:
    """Someone else writing to the same server: Cypher over Bolt, SQL over HTTP."""

    def __init__(self, graph_dir: Path, database: str) -> None:
        info = server.running_info(graph_dir)
        assert info is not None
        creds = server.credentials(graph_dir)
        self.database = database
        self.driver = neo4j.GraphDatabase.driver(info.bolt_uri, auth=(creds.user, creds.password))
        self.http = ArcadeHttp(info.http_url, creds.user, creds.password)

    def cypher(self, query: str) -> list[dict]:
        with self.driver.session(database=self.database) as session:
            return session.run(query).data()

    def sql(self, command: str) -> list[dict]:
        return self.http.sql(self.database, command)

    def count(self, type_name: str) -> int:
        return int(self.sql(f"SELECT count(*) AS n FROM {type_name}")[0]["n"])

    def types(self) -> dict[str, int]:
        return {r["name"]: r["records"] for r in self.sql("SELECT FROM schema:types")}

    def indexes(self) -> list[str]:
        rows = self.sql("SELECT name, indexes FROM schema:types")
        return sorted(i["name"] for r in rows for i in r["indexes"])

    def close(self) -> None:
        self.driver.close()
