"""Tests of eval_pipeline.llm (no real provider: a local wire-format server)."""
