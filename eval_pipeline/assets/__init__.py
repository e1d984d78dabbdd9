"""The Dagster layer: thin assets and checks over the domain packages, one module a stage."""
