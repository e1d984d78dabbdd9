"""eval_pipeline: an evaluation loop for agent-memory context graphs."""

__version__ = "0.1.0"
