"""The files of a "using files for epoch" log line, read without Python's parser: the line is tokenized into string
literals and brackets, so its memory is one copy of each file name (shared across lines), not an AST of the line."""

from __future__ import annotations

import ast
import re
from typing import Any, Dict, List, Optional

from ..pure.text import short_repr

#: Characters of the files of one "using files" line that are read; the files of a longer line are not read (the
#: report says so), so a crafted line costs no memory beyond it. RETURNN's lines stay far below: 4 Mi characters
#: are about 40,000 file names of 100 characters for one rank and sub-epoch.
MAX_FILES_LINE_CHARS = 1 << 22

_TOKEN = re.compile(
    r"""\s*(?:(?P<str>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")|(?P<punct>[\[\](){},:]))""",
    re.DOTALL,
)
_CLOSE = {"[": "]", "(": ")", "{": "}"}
#: Nesting of file trees followed at most (as ``MAX_TREE_DEPTH`` of the file lists).
_MAX_DEPTH = 100


class FilesLiteralError(ValueError):
    """The text is not a Python literal of file trees (str leaves in lists, tuples and dicts)."""


def parse_files_literal(text: str, *, names: Optional[Dict[str, str]] = None) -> List[Any]:
    """The list of file trees that ``text`` (``repr`` of a list of file trees) holds; file names already in ``names``
    are taken from it (one copy per name however often the logs list it), new ones added.

    :raises FilesLiteralError: naming the character where the text stops being such a literal

    >>> parse_files_literal("['a.hdf', (\\"b'c\\", 'd\\\\n'), {'x': ['e']}]")
    ['a.hdf', ("b'c", 'd\\n'), {'x': ['e']}]
    >>> parse_files_literal("[1, 2]")
    Traceback (most recent call last):
    ...
    i6_shard.core.io.log_files_line.FilesLiteralError: not a string, bracket, comma or colon at character 1: '1, 2]'
    """
    names = {} if names is None else names
    stack: List[list] = []  # open containers: [kind, items, pending dict key, expecting a value]
    result: Optional[List[Any]] = None
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise FilesLiteralError(
                f"not a string, bracket, comma or colon at character {pos}: {text[pos : pos + 20]!r}"
            )
        pos = m.end()
        if result is not None:
            raise FilesLiteralError(f"text after the list at character {m.start()}")
        token = m["punct"]
        if token in _CLOSE:
            if not stack and token != "[":
                raise FilesLiteralError("the files are not a list")
            if len(stack) >= _MAX_DEPTH:
                raise FilesLiteralError(f"nested more than {_MAX_DEPTH} levels")
            stack.append([token, [] if token != "{" else {}, None, True])
            continue
        if not stack:
            raise FilesLiteralError("the files are not a list")
        top = stack[-1]
        if token in ("]", ")", "}"):
            if _CLOSE[top[0]] != token or top[2] is not None:
                raise FilesLiteralError(f"{token!r} closes {top[0]!r} at character {m.start()}")
            stack.pop()
            value = tuple(top[1]) if top[0] == "(" else top[1]
            if not stack:
                result = value
            else:
                _add(stack[-1], value, m.start())
            continue
        if token == ",":
            if top[3] or top[2] is not None:
                raise FilesLiteralError(f"a comma where a value belongs at character {m.start()}")
            top[3] = True
            continue
        if token == ":":
            if top[0] != "{" or top[2] is None or not isinstance(top[2], list):
                raise FilesLiteralError(f"a colon outside a dict key at character {m.start()}")
            top[2] = top[2][0]  # the key is complete: a value follows
            top[3] = True
            continue
        literal = m["str"]
        value = literal[1:-1] if "\\" not in literal else ast.literal_eval(literal)
        value = names.setdefault(value, value)
        if top[0] == "{" and top[2] is None:
            if not top[3]:
                raise FilesLiteralError(f"a missing comma at character {m.start()}")
            top[2] = [value]  # a key, waiting for its colon
            continue
        _add(top, value, m.start())
    if result is None:
        raise FilesLiteralError("the list is not closed (the line is cut off?)")
    return result


def _add(top: list, value: Any, at: int) -> None:
    if not top[3]:
        raise FilesLiteralError(f"a missing comma at character {at}")
    if top[0] == "{":
        if top[2] is None or isinstance(top[2], list):
            raise FilesLiteralError(f"a dict value without its key at character {at}")
        top[1][top[2]] = value
        top[2] = None
    else:
        top[1].append(value)
    top[3] = False


#: Lines at most this long that are no literal of file trees are given to Python's parser for the message (it names
#: e.g. an int leaf); longer ones are named by the tokenizer alone.
_EXPLAIN_MAX_CHARS = 1 << 16


def read_files_of_line(
    text: str, *, where: str, epoch: int, line: str, cut: bool, names: Dict[str, str]
) -> Optional[List[Any]]:
    """The files of a "using files" line (``text``: what follows ``using files for epoch E:``), or None if they are
    longer than :data:`MAX_FILES_LINE_CHARS` (not read).

    :param where: ``<log>:<line>`` for messages
    :param cut: whether the line was cut at the reader's line limit
    :raises ValueError: naming ``where`` if the text is not a list of file trees
    """
    if len(text) > MAX_FILES_LINE_CHARS:
        return None
    try:
        return parse_files_literal(text, names=names)
    except FilesLiteralError as exc:
        reason = str(exc)
    if len(text) <= _EXPLAIN_MAX_CHARS and not cut:
        try:
            value = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        else:
            if isinstance(value, list):
                return value  # a list of other things: the caller's file-tree check names the wrong leaf
    why = f"; the line is longer than {len(line):,} characters and was cut there" if cut else "; is the line cut off?"
    raise ValueError(
        f"{where}: the files of epoch {epoch} are not a Python literal list of file trees ({reason[:100]}){why} "
        f"{short_repr(line)}"
    )
