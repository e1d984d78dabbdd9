"""`python -m eval_pipeline.plugins`: every plug-in name of every kind and where it comes from.
`python -m eval_pipeline.plugins KIND SPEC`: resolve one spec and say what it is, or print the
one-line load error and exit 2. Nothing is constructed: resolving imports the module and checks
the class against the kind's interface, which is what fails for a broken plug-in.
"""

from __future__ import annotations

import sys

from eval_pipeline.plugins.errors import PluginLoadError
from eval_pipeline.plugins.kinds import KIND_NAMES
from eval_pipeline.plugins.registry import available, find
from eval_pipeline.plugins.sources import malformed_entry_points

USAGE = f"usage: python -m eval_pipeline.plugins [KIND SPEC]  (KIND: {', '.join(KIND_NAMES)})"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if not args:
            for kind in KIND_NAMES:
                for name, origin in available(kind).items():
                    print(f"{kind}\t{name}\t{origin}")
            for entry in malformed_entry_points():
                print(f"ignored entry point (name is not KIND.NAME): {entry}", file=sys.stderr)
            return 0
        if len(args) != 2:
            print(USAGE, file=sys.stderr)
            return 2
        plugin = find(args[0], args[1])
    except PluginLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{plugin.kind} {plugin.spec!r}: {plugin.path} ({plugin.origin})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
