"""Keep deepeval local: no telemetry, no writes to its cache folder, no .env loading, no upload.

deepeval reads its settings from the environment when first imported, so `harden_deepeval_env`
must run before `import deepeval` (the adapter module does this at its top). deepeval uploads
results to Confident AI whenever a Confident key is configured; an evaluation pipeline must not
send goldens or answers anywhere, so we refuse to start instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import sys
from pathlib import Path

from eval_pipeline.llm.errors import ConfidentUploadRefused

log = logging.getLogger(__name__)

DEEPEVAL_HARDENING: dict[str, str] = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
    "DEEPEVAL_FILE_SYSTEM": "READ_ONLY",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    # Metric decisions by our judge (through the layer), never routed to a hosted "System One"
    # model, even if a user's deepeval settings say so.
    "DEEPEVAL_EVAL_MODE": "llm",
}
CONFIDENT_KEY_ENV = "CONFIDENT_API_KEY"


_hardened_before_import = False


def harden_deepeval_env() -> bool:
    """Set the variables above; False (and a warning) if deepeval was imported before the
    first call, so it may have read other settings. Later calls (every judged question makes
    one) are quiet once the first came in time."""
    global _hardened_before_import
    os.environ.update(DEEPEVAL_HARDENING)
    if "deepeval" not in sys.modules:
        _hardened_before_import = True
        return True
    if _hardened_before_import:
        return True
    log.warning(
        "deepeval was imported before harden_deepeval_env(); settings it already read "
        "may not reflect %s",
        ", ".join(sorted(DEEPEVAL_HARDENING)),
    )
    return False


# `deepeval.test_run` prints this to stdout when imported under DEEPEVAL_FILE_SYSTEM=READ_ONLY,
# which we set on purpose: into every judged run's output, before its summary (wrapped).
READ_ONLY_NOTICE = re.compile(
    r"Warning: DeepEval is configured for read only environment\.\s+Test runs will not be"
    r"\s+written to disk\.\s*"
)


def import_deepeval() -> None:
    """Harden the environment, then import deepeval once without its read-only notice (its
    one print at import, silenced there); anything else it prints goes on to stderr."""
    harden_deepeval_env()
    if "deepeval" in sys.modules:
        return
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        import deepeval  # noqa: F401
    rest = READ_ONLY_NOTICE.sub("", printed.getvalue())
    if rest.strip():
        print(rest.rstrip(), file=sys.stderr)


def _legacy_key_file() -> Path:
    # deepeval's `login` stores keys in <DEEPEVAL_CACHE_FOLDER or .deepeval>/.deepeval (JSON).
    return Path(os.environ.get("DEEPEVAL_CACHE_FOLDER", ".deepeval")) / ".deepeval"


def ensure_no_confident_upload() -> None:
    """Raise ConfidentUploadRefused when a Confident AI key is configured (env or key file)."""
    for name, value in os.environ.items():
        if name.upper() == CONFIDENT_KEY_ENV and value.strip():
            raise ConfidentUploadRefused(
                f"{name} is set: deepeval would upload evaluation results to Confident AI. "
                f"Unset it (e.g. `unset {name}`) to run this pipeline; results stay local."
            )
    key_file = _legacy_key_file()
    try:
        stored = json.loads(key_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(stored, dict) and any(
        str(k).lower() == "confident_api_key" and v for k, v in stored.items()
    ):
        raise ConfidentUploadRefused(
            f"{key_file} holds a Confident AI key (from `deepeval login`): deepeval would upload "
            "evaluation results. Remove it (`deepeval logout`) to run this pipeline."
        )
