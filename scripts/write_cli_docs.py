"""Write docs/cli.md's tables of plan options anew from the one table of them (``i6_shard.core.PLAN_OPTIONS``):

    python scripts/write_cli_docs.py

Each table sits between ``<!-- plan options: COMMAND -->`` and ``<!-- end of plan options -->``;
tests/cli/test_cli_docs.py fails while one differs from what this writes.
"""

from __future__ import annotations

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "cli.md")
#: A generated table: the command's name, then the table.
BLOCK = re.compile(r"(<!-- plan options: (?P<command>[\w-]+) -->\n)(?P<table>.*?)(<!-- end of plan options -->)", re.S)


def rewritten(text: str) -> str:
    """``text`` (docs/cli.md) with each generated table as ``i6_shard.cli.options_markdown`` writes it."""
    sys.path.insert(0, ROOT)
    from i6_shard.cli import options_markdown

    return BLOCK.sub(lambda m: m.group(1) + options_markdown(m.group("command")) + m.group(4), text)


def main() -> int:
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    new = rewritten(text)
    if new != text:
        with open(DOC, "w", encoding="utf-8") as f:
            f.write(new)
    print(f"{DOC}: {len(BLOCK.findall(new))} tables of plan options{'' if new != text else ', unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
