"""Type and range checks of user-given values (settings, job and builder arguments): a wrong value
is a TypeError or ValueError that names the argument, the value and what to pass instead."""

from __future__ import annotations

import numbers
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .text import short_repr

__all__ = ["check_int", "check_optional_int", "check_bool", "check_optional_bool", "check_optional_mapping"]

#: The deepest nesting of dicts and lists a setting may have (``torch_distributed`` with sync levels of rank lists
#: needs 5): deeper ones are refused by name before anything walks them recursively (RecursionError).
MAX_SETTING_DEPTH = 16


def check_int(value: Any, *, name: str, minimum: Optional[int] = None, hint: str = "") -> int:
    """``value`` as a Python int if it is an integer (not a bool) of at least ``minimum`` (if given).
    numpy integers are accepted and converted: they do not hash in Sisyphus or go into JSON.

    :param hint: appended to the message, e.g. what the argument means or what to use instead

    >>> check_int(2.5, name="num_epochs", minimum=1)
    Traceback (most recent call last):
    ...
    TypeError: num_epochs=2.5 has type float; num_epochs must be a positive int
    """
    kind = {None: "an int", 0: "a non-negative int", 1: "a positive int"}.get(minimum, f"an int >= {minimum}")
    suffix = f" ({hint})" if hint else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        fix = f"; pass {name}={value.strip()}" if isinstance(value, str) and value.strip().isdigit() else ""
        raise TypeError(f"{name}={value!r} has type {type(value).__name__}; {name} must be {kind}{suffix}{fix}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}={value!r} must be {kind}{suffix}")
    return int(value)  # numpy integers do not hash in Sisyphus


def check_optional_int(value: Any, *, name: str, minimum: Optional[int] = None, hint: str = "") -> Optional[int]:
    """:func:`check_int`, with ``None`` (not given) passing through."""
    return None if value is None else check_int(value, name=name, minimum=minimum, hint=hint)


def check_bool(value: Any, *, name: str) -> bool:
    """``value`` if it is ``True`` or ``False``; a str such as ``"no"`` would read as true.

    >>> check_bool("no", name="use_worker_proc")
    Traceback (most recent call last):
    ...
    TypeError: use_worker_proc='no' has type str; use_worker_proc must be True or False
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}={value!r} has type {type(value).__name__}; {name} must be True or False")
    return bool(value)


def check_optional_bool(value: Any, *, name: str) -> Optional[bool]:
    """:func:`check_bool`, with ``None`` (not given) passing through."""
    return None if value is None else check_bool(value, name=name)


def check_optional_mapping(value: Any, *, name: str, example: str) -> Optional[Mapping]:
    """``value`` if it is ``None`` or a mapping (a dict).

    >>> check_optional_mapping("x", name="torch_distributed", example="{}")
    Traceback (most recent call last):
    ...
    TypeError: torch_distributed='x' has type str; torch_distributed must be a dict, e.g. {}
    """
    if value is not None and not isinstance(value, Mapping):
        raise TypeError(f"{name}={value!r} has type {type(value).__name__}; {name} must be a dict, e.g. {example}")
    return value


def check_choice(value: Any, *, name: str, choices: Sequence[str], problem: str = "is unknown") -> str:
    """``value`` if it is one of the str ``choices``, else ``ValueError`` naming them.

    :param problem: what is wrong with another value, e.g. "is not supported by DistributeFilesDataset"

    >>> check_choice("even", name="distribution", choices=("returnn", "balanced"))
    Traceback (most recent call last):
    ...
    ValueError: distribution='even' is unknown; use one of ('returnn', 'balanced')
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}={short_repr(value)} {problem}; use one of {tuple(choices)}")  # bounded: a file's text
    return value


def first_negative(values: Any) -> Optional[int]:
    """The index of the first negative entry of an integer array (sizes, costs, lengths), None if there is
    none: the one rule that costs are not negative, which every archive and plan checks.

    >>> first_negative(np.array([3, 0, -2, -1])), first_negative(np.array([], dtype=np.int64))
    (2, None)
    """
    arr = np.asarray(values)
    if not arr.size or arr.dtype.kind == "u" or int(arr.min()) >= 0:
        return None
    return int(np.argmax(arr < 0))


def nesting_depth(value: Any, *, limit: int = MAX_SETTING_DEPTH) -> int:
    """Levels of dicts, lists and tuples in ``value`` (a scalar is 0), counted without recursion and up to
    ``limit + 1`` at most (whatever the depth, only the top ``limit + 1`` levels are walked).

    >>> nesting_depth({"sync": [{"group": [[0, 1], [2, 3]]}]}), nesting_depth(5)
    (5, 0)
    >>> nesting_depth([[[[1]]]], limit=2)
    3
    """
    depth, level = 0, [value]
    while depth <= limit:
        below = []
        for item in level:
            if isinstance(item, Mapping):
                below.extend(item.values())
            elif isinstance(item, (list, tuple)):
                below.extend(item)
        if not any(isinstance(x, (Mapping, list, tuple)) for x in level):
            return depth
        depth, level = depth + 1, below
    return depth
