"""Corpus stage: pinned LongMemEval upstream → golden JSONL → session fixtures."""
