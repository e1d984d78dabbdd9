"""The graph stage: the graph store, the embedded server, schema, injection and checks.

Plain Python, importable without Dagster running; `eval_pipeline.assets.graph` is the thin
Dagster layer over it.
"""
