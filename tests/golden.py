"""Golden files: outputs users read, compared byte for byte. ``I6_SHARD_UPDATE_GOLDEN=1`` (exactly
"1") rewrites them instead; review the diff before committing. Any other value, or none, compares."""

import os

GOLDEN_DIR = os.path.join(os.path.dirname(__file__), "golden")
UPDATE_ENV = "I6_SHARD_UPDATE_GOLDEN"


def updating() -> bool:
    """Whether golden files are rewritten: ``I6_SHARD_UPDATE_GOLDEN`` is exactly "1" (read at each call)."""
    return os.environ.get(UPDATE_ENV) == "1"


def check_golden(name: str, text: str, *, golden_dir: str = GOLDEN_DIR) -> None:
    """Assert that ``text`` equals ``<golden_dir>/<name>`` byte for byte (UTF-8, newlines as they are),
    or write it there when :func:`updating`."""
    path = os.path.join(golden_dir, name)
    if updating():
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    if not os.path.exists(path):
        raise AssertionError(f"golden file {path} is missing; create it with {UPDATE_ENV}=1 and review it")
    with open(path, encoding="utf-8", newline="") as f:
        assert text == f.read(), f"{name} changed; if intended, rerun with {UPDATE_ENV}=1 and review"
