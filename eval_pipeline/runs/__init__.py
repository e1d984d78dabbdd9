"""Run bundles: one directory per run, written atomically, never overwritten."""
