"""Values shown in messages, cut to a bounded length: a file list may hold names of megabytes."""

from __future__ import annotations

from typing import Any, Optional, Sequence

__all__ = ["short_repr", "first_difference"]

#: Characters of a value shown in a message before it is cut.
MAX_SHOWN_CHARS = 200


def short_repr(value: Any, *, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)``, cut in the middle to about ``limit`` characters, saying how many were left out.

    >>> short_repr("/data/" + "x" * 300 + ".hdf", limit=40)
    "'/data/xxx...[292 chars]...xxxxx.hdf'"
    >>> short_repr("/data/a.hdf")
    "'/data/a.hdf'"
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    keep = max(limit - 20, 10)
    head, tail = text[: keep // 2], text[len(text) - (keep - keep // 2) :]
    return f"{head}...[{len(text) - len(head) - len(tail)} chars]...{tail}"


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> Optional[int]:
    """The index of the first entry where ``a`` and ``b`` differ, for messages about two key lists: where one is
    the other's start, the shorter one's length; None where they are equal.

    >>> first_difference(["a", "b", "c"], ["a", "x"]), first_difference(["a"], ["a", "b"]), first_difference("ab", "ab")
    (1, 1, None)
    """
    idx = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if idx is not None:
        return idx
    return None if len(a) == len(b) else min(len(a), len(b))
