"""How numbers appear in summaries and reports: JSON floats rounded to fixed digits (so the bytes are fixed),
percentages and counts in text; one definition for every report."""

from __future__ import annotations

import math
from typing import Optional

#: Digits of every float in a summary.
JSON_DIGITS = 6


def json_float(x: Optional[float]) -> Optional[float]:
    """A float for a summary: rounded to :data:`JSON_DIGITS` digits, ``-0.0`` as ``0.0``; None and nan as None.

    >>> json_float(1 / 3), json_float(-1e-9), json_float(float("nan"))
    (0.333333, 0.0, None)
    """
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), JSON_DIGITS) + 0.0


def pct(x: Optional[float], *, digits: int = 2) -> str:
    """A share as a percentage with ``digits`` decimals; None as ``?``.

    >>> pct(0.1234), pct(0.1234, digits=1), pct(None)
    ('12.34%', '12.3%', '?')
    """
    return "?" if x is None else f"{100 * x:.{digits}f}%"


def num(x: Optional[int]) -> str:
    """A count with thousands separators; None as ``?``.

    >>> num(1234567), num(None)
    ('1,234,567', '?')
    """
    return "?" if x is None else f"{x:,}"
