"""A plug-in module that fails while being imported (for the loader's error message)."""

raise RuntimeError("boom while importing the plug-in")
