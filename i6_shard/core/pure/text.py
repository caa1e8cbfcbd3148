"""Values shown in messages, cut to a bounded length: a file list may hold names of megabytes."""

from __future__ import annotations

from typing import Any

__all__ = ["short_repr"]

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
