"""A tier-2 source event as session turns (the injection representation, `convert.py`).

Apart from `convert` so that the corpus checks (`expectations.py`) read the turns exactly
as they are injected without importing the converter, which imports the loader.
"""

from __future__ import annotations

from typing import Any

from eval_pipeline.tier2.schema import Event


def render_turns(event: Event) -> list[dict[str, Any]]:
    """One turn per message: `"<author>: <text>"`, the title on its own line first."""
    turns = []
    for i, m in enumerate(event.messages):
        content = f"{m.author}: {m.text.strip()}"
        if i == 0 and event.title:
            content = f"{event.title.strip()}\n{content}"
        turns.append({"role": event.source, "content": content, "index": i})
    return turns
