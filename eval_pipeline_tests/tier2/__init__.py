"""Tier-2 scenarios: schema, committed corpus, conversion, metrics and panels."""
