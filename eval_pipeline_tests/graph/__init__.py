"""Tests of the graph stage, against a real embedded ArcadeDB."""
