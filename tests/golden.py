"""Golden files: outputs users read, compared byte for byte. ``I6_SHARD_UPDATE_GOLDEN=1`` (exactly
"1") rewrites them instead; review the diff before committing. Any other value compares."""

import os

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "golden")
UPDATE = os.environ.get("I6_SHARD_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    """Assert that ``text`` equals ``tests/golden/<name>`` (or write it there when updating)."""
    path = os.path.join(GOLDEN_DIR, name)
    if UPDATE:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    if not os.path.exists(path):
        raise AssertionError(f"golden file {path} is missing; create it with I6_SHARD_UPDATE_GOLDEN=1 and review it")
    with open(path, encoding="utf-8") as f:
        assert text == f.read(), f"{name} changed; if intended, rerun with I6_SHARD_UPDATE_GOLDEN=1 and review"
