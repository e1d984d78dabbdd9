"""Everything the pipeline publishes goes through `eval_pipeline/atomic.py`, the writer that
redacts before the rename (issue 28, finding 4: `report.html` had a writer of its own that
never redacted). A rename anywhere else is one of the files below, none of which holds text
from a model or an option, or it is a new publisher that skips redaction."""

from __future__ import annotations

import re

from eval_pipeline.settings import PACKAGE_DIR

# Files renamed into place elsewhere, and why no redaction is needed there.
NOT_PUBLISHED = {
    "atomic.py": "the writer itself",
    "llm/credentials.py": "redaction rewriting a file in place",
    "corpus/generate.py": "synthetic LongMemEval-shaped data, from a seed",
    "llm/local_models.py": "downloaded weights and their sha256 memo",
    "processes.py": "child-process records: pid, port, command line of our own",
    "score/tokens.py": "the tokenizer's BPE file, sha256-checked",
    "retrieve/journal.py": "the resume journal: replies already redacted as they arrived",
    "preflight.py": "an empty probe file checking the runs dir is writable, removed at once",
}
RENAME = re.compile(r"\bos\.(?:replace|rename)\(|\bmkstemp\(")


def test_only_the_atomic_writer_publishes():
    renaming = {
        str(path.relative_to(PACKAGE_DIR))
        for path in PACKAGE_DIR.rglob("*.py")
        if RENAME.search(path.read_text(encoding="utf-8"))
    }
    assert renaming - set(NOT_PUBLISHED) == set()
