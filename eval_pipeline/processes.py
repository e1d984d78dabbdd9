"""Is a process still there? Shared by the graph lease and the local model server's records."""

from __future__ import annotations

import os


def signal_reaches(pid: int) -> bool:
    """True while a process with this pid exists (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; it is just not ours to signal
    return True
