"""Read and write file lists (.txt, .json, .py) exactly as RETURNN's
DistributeFilesDataset reads its ``files`` option from a path."""

from __future__ import annotations

import json
import os
import re
from typing import Any, List, Sequence, Tuple

from .atomic import atomic_write
from .file_tree import FileTree, check_file_trees

__all__ = ["FILE_LIST_EXTENSIONS", "read_file_list", "write_file_list", "normalize_file_tree",
           "parse_returnn_py_literal", "txt_entry_problem"]

FILE_LIST_EXTENSIONS = (".txt", ".json", ".py")


def normalize_file_tree(tree: FileTree) -> FileTree:
    """The tree as it comes back from any list file: tuples become lists.

    JSON has no tuples, and RETURNN's native ``.py`` literal parser does not accept
    them either, so a list file always gives lists. The tree key is unchanged.

    >>> normalize_file_tree(("a", {"k": ("b",)}))
    ['a', {'k': ['b']}]
    """
    if isinstance(tree, (list, tuple)):
        return [normalize_file_tree(t) for t in tree]
    if isinstance(tree, dict):
        return {k: normalize_file_tree(v) for k, v in tree.items()}
    if isinstance(tree, str):
        return str.__str__(tree)  # a plain str: subclasses such as numpy.str_ have their own repr
    return tree


def read_file_list(path: str | os.PathLike) -> List[FileTree]:
    """Read a file list as RETURNN's ``DistributeFilesDataset._lazy_init_file_list`` does.

    - ``.txt``: one file per line; lines are stripped, blank lines and lines
      starting with ``#`` are skipped (read in the locale's encoding, as RETURNN does).
    - ``.json``: a JSON list of file trees.
    - ``.py``: a Python literal list, parsed like RETURNN's native parser
      (``returnn.util.literal_py_to_pickle``): lists, dicts, sets, str, numbers and None,
      but no tuples, no ``True``/``False``, no comments before the list; what that
      parser rejects is rejected here too (see :func:`parse_returnn_py_literal`).

    Tuple trees never come back from a list file: JSON has no tuples and RETURNN's
    ``.py`` parser does not accept them; the tree key is the same either way.

    :raises FileNotFoundError: if the list file does not exist
    :raises ValueError: on an unknown extension, a directory, unparsable content (a ``.txt`` list not
        in the locale's encoding included), or content that is not a list
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1]
    if ext not in FILE_LIST_EXTENSIONS:
        raise ValueError(
            f"file list {path!r} has extension {ext!r}; RETURNN reads only {', '.join(FILE_LIST_EXTENSIONS)}: "
            "rename it or convert it with write_file_list"
        )
    if not os.path.exists(path):
        raise FileNotFoundError(f"file list {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"file list {path!r} is a directory; give the path of a {'/'.join(FILE_LIST_EXTENSIONS)} "
                         "file that lists the files")
    if ext == ".txt":
        try:
            with open(path, "rt") as f:
                lines = f.readlines()
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"file list {path!r} is not valid {exc.encoding} text ({exc.reason} at byte {exc.start}); RETURNN "
                f"reads a .txt list in the locale's encoding (here {exc.encoding}): write the list as .json "
                "(write_file_list escapes any name)") from None
        stripped = (line.strip() for line in lines)
        return [line for line in stripped if line and not line.startswith("#")]
    try:
        if ext == ".json":
            with open(path, "rt") as f:
                files = json.load(f)
        else:
            with open(path, "rb") as f:
                files = parse_returnn_py_literal(f.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"file list {path!r} cannot be read as RETURNN reads a {ext} list: {exc}") from None
    if not isinstance(files, list):
        raise ValueError(f"file list {path!r} holds a {type(files).__name__}, but RETURNN needs a list of file trees")
    return files


def write_file_list(files: Sequence[FileTree], path: str | os.PathLike) -> None:
    """Write a file list that RETURNN reads back as the same list (tuples as lists).

    ``.txt`` only holds plain str entries that survive RETURNN's line handling
    (no line break, no surrounding blanks, no leading ``#``, valid UTF-8); use
    ``.json`` for anything else. ``.json`` and ``.py`` need str dict keys.
    A ``.py`` list is checked with :func:`parse_returnn_py_literal` and padded with
    trailing blanks where RETURNN's parser would otherwise run out of output buffer
    (many names over 255 bytes). The file is written atomically, in UTF-8.

    :raises ValueError: on an unknown extension, or an entry the format cannot hold
    """
    path = os.fspath(path)
    check_file_trees(files)
    ext = os.path.splitext(path)[1]
    if ext == ".txt":
        for idx, f in enumerate(files):
            problem = txt_entry_problem(f)
            if problem:
                shown = f" ({f!r})" if isinstance(f, str) else ""
                raise ValueError(f"file list entry {idx}{shown} {problem}; use a .json list")
        data = "".join(f + "\n" for f in files).encode("utf-8")
    elif ext in (".json", ".py"):
        normalized = [normalize_file_tree(t) for t in files]
        for idx, tree in enumerate(normalized):
            _check_str_keys(tree, idx=idx)
        if ext == ".json":
            # One entry per line; ASCII, so that the reader's locale does not matter.
            data = ("[\n" + ",\n".join(map(json.dumps, normalized)) + "\n]\n").encode("ascii")
        else:
            data = _py_list_bytes(normalized)
    else:
        raise ValueError(
            f"cannot write file list {path!r}: extension {ext!r} is not one of {', '.join(FILE_LIST_EXTENSIONS)}"
        )
    with atomic_write(path, "wb") as f:
        f.write(data)


def txt_entry_problem(entry: Any) -> str:
    """Why a ``.txt`` list cannot hold ``entry`` so that RETURNN reads it back unchanged
    (its reader strips lines and skips blank and ``#`` lines), or ``""`` if it can.

    >>> txt_entry_problem("/data/a.hdf"), txt_entry_problem(" a.hdf"), txt_entry_problem(("a", "b"))
    ('', "would not survive RETURNN's .txt parsing (line break, surrounding blanks or leading '#')", 'is a tuple, but a .txt list holds only str')
    """
    if not isinstance(entry, str):
        return f"is a {type(entry).__name__}, but a .txt list holds only str"
    if entry != entry.strip() or "\n" in entry or "\r" in entry or entry.startswith("#"):
        return "would not survive RETURNN's .txt parsing (line break, surrounding blanks or leading '#')"
    if not _is_utf8(entry):
        return "is not valid UTF-8 text"
    return ""


def _is_utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, e.g. from undecodable bytes in a file name
        return False
    return True


def _check_str_keys(tree: Any, *, idx: int) -> None:
    if isinstance(tree, dict):
        for k, v in tree.items():
            if not isinstance(k, str):
                raise ValueError(f"file tree entry {idx} has dict key {k!r} of type {type(k).__name__}; "
                                 "a .json or .py list needs str keys")
            _check_str_keys(v, idx=idx)
    elif isinstance(tree, list):
        for v in tree:
            _check_str_keys(v, idx=idx)


def _py_list_bytes(normalized: List[Any]) -> bytes:
    """``repr`` of the list in UTF-8, checked with RETURNN's parser and padded as it needs."""
    data = repr(normalized).encode("utf-8", "surrogatepass")  # repr escapes lone surrogates anyway
    parsed, out_size = _parse_py(data, check_buffer=False)
    assert parsed == normalized, "repr of the file list does not parse back identically"  # internal invariant
    # Trailing blanks are skipped by the parser but count as input, hence as room for output.
    return data + b"\n" * max(1, out_size - (len(data) + _RETURNN_OUT_SLACK))


# RETURNN's py_to_pickle allocates len(input) + 1000 bytes for the pickle it writes.
_RETURNN_OUT_SLACK = 1000
# isspace() in the C locale; RETURNN's parser skips these between items.
_WS = b" \t\n\v\f\r"
_SKIP_WS = re.compile(rb"[ \t\n\v\f\r]*")
_STR_BODY = {
    ord("'"): re.compile(rb"[^'\\]*(?:\\[\s\S][^'\\]*)*'"),
    ord('"'): re.compile(rb'[^"\\]*(?:\\[\s\S][^"\\]*)*"'),
}
_ESCAPE = re.compile(rb"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|([\s\S]))")
_SIMPLE_ESCAPES = {ord("r"): b"\r", ord("t"): b"\t", ord("n"): b"\n", ord("\\"): b"\\", ord('"'): b'"',
                   ord("'"): b"'", ord("\n"): b"\n"}
_NUM_CHARS = frozenset(b"0123456789+-.")


def parse_returnn_py_literal(data: bytes) -> Any:
    """Parse a ``.py`` file list as RETURNN's native ``literal_py_to_pickle.literal_eval``
    does, with its quirks: items may be separated by several commas (``[,'a',,]`` is
    ``['a']``), text after the first item is ignored, escapes are only
    ``\\r \\t \\n \\\\ \\' \\" \\x.. \\u.... \\U........`` with lowercase hex (and a
    backslash-newline keeps the newline), no tuples, bools or comments before the item,
    and the result must fit its output buffer (input length + 1000 bytes).
    Numbers it would misread or crash on are rejected here.

    :param data: the file's bytes
    :raises ValueError: where RETURNN's parser fails (it raises AssertionError there)

    >>> parse_returnn_py_literal(b"[,'a\\\\x41', {'k': ['b']},] trailing text")
    ['aA', {'k': ['b']}]
    >>> parse_returnn_py_literal(b"[('a', 'b')]")
    Traceback (most recent call last):
    ...
    ValueError: RETURNN's .py parser fails at byte 1 in a list: unexpected '('
    """
    return _parse_py(data, check_buffer=True)[0]


def _parse_py(data: bytes, *, check_buffer: bool) -> Tuple[Any, int]:
    parser = _PyParser(data)
    c, had_item, value = parser.parse()
    if not had_item:
        parser.error("at the top", c)
    size = parser.out_size + 1  # + STOP
    if check_buffer and size > len(data) + _RETURNN_OUT_SLACK:
        raise ValueError(
            f"RETURNN's .py parser would overflow its output buffer ({size} bytes of pickle for "
            f"{len(data)} bytes of input, it has room for {len(data) + _RETURNN_OUT_SLACK}); "
            "rewrite the list with write_file_list (which pads it) or use .json")
    return value, size


class _PyParser:
    """Port of ``Parser`` in RETURNN's ``py-to-pickle.cpp``; ``out_size`` counts the pickle bytes it writes."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0
        self.out_size = 2  # PROTO, protocol

    def error(self, where: str, c: int) -> None:
        what = "end of file" if c < 0 else repr(chr(c))
        raise ValueError(f"RETURNN's .py parser fails at byte {max(self.pos - 1, 0)} {where}: unexpected {what}")

    def parse(self) -> Tuple[int, bool, Any]:
        """``Parser::parse``: (the char that ended the item (consumed; -1 at EOF), got an item, the item)."""
        data = self.data
        had_item = False
        value = None
        while True:
            pos = _SKIP_WS.match(data, self.pos).end()
            if pos >= len(data):
                self.pos = pos
                return -1, had_item, value
            c = data[pos]
            self.pos = pos + 1
            if had_item:
                return c, True, value
            if c == 0x27 or c == 0x22:  # ' "
                value = self.parse_str(c)
            elif c == 0x5B:  # [
                value = self.parse_list()
            elif c == 0x7B:  # {
                value = self.parse_dict_or_set()
            elif c in _NUM_CHARS:
                c, value = self.parse_num(c)
                if c < 0 or c not in _WS:
                    return c, True, value
            elif c == 0x4E:  # N
                if data[self.pos:self.pos + 3] != b"one":
                    self.error("after 'N' (expected None)", c)
                self.pos += 3
                self.out_size += 1
                value = None
            else:
                return c, False, None
            had_item = True

    def parse_str(self, quote: int) -> str:
        m = _STR_BODY[quote].match(self.data, self.pos)
        if m is None:
            self.pos = len(self.data)
            self.error("in a str", -1)
        body = m.group()[:-1]
        self.pos = m.end()
        if 0x5C in body:  # backslash
            body = _ESCAPE.sub(self._unescape, body)
        n = len(body)
        self.out_size += n + (2 if n <= 0xFF else 5 if n <= 0xFFFFFFFF else 9)
        try:
            return body.decode("utf-8", "surrogatepass")  # as pickle decodes BINUNICODE
        except UnicodeDecodeError as exc:
            raise ValueError(f"RETURNN's .py parser gives a str that is not UTF-8: {exc}") from None

    def _unescape(self, m: "re.Match[bytes]") -> bytes:
        hex_digits = m.group(1) or m.group(2) or m.group(3)
        if hex_digits is not None:
            code = int(hex_digits, 16)
            if code > 0x10FFFF:
                raise ValueError(f"RETURNN's .py parser fails on escape {m.group().decode()!r} (beyond U+10FFFF)")
            return chr(code).encode("utf-8", "surrogatepass")
        c = m.group(4)[0]
        if c not in _SIMPLE_ESCAPES:
            raise ValueError(f"RETURNN's .py parser fails on escape {m.group().decode('utf-8', 'replace')!r} "
                             "(it knows only \\r \\t \\n \\\\ \\' \\\" and lowercase \\x \\u \\U)")
        return _SIMPLE_ESCAPES[c]

    def parse_list(self) -> List[Any]:
        self.out_size += 3  # EMPTY_LIST, MARK, APPENDS
        items = []
        while True:
            c, had_item, value = self.parse()
            if had_item:
                items.append(value)
            if c == 0x2C:  # ,
                continue
            if c == 0x5D:  # ]
                return items
            self.error("in a list", c)

    def parse_dict_or_set(self) -> Any:
        self.out_size += 3  # EMPTY_DICT or EMPTY_SET, MARK, SETITEMS or ADDITEMS
        items = []
        is_set = False
        want_key = True
        while True:
            c, had_item, value = self.parse()
            if had_item:
                items.append(value)
            if c == 0x2C:  # ,
                if len(items) == 1:
                    is_set, want_key = True, False
                if want_key:
                    self.error("in a dict after a key", c)
                if not is_set:
                    want_key = True
            elif c == 0x3A:  # :
                if not want_key or is_set:
                    self.error("in a dict or set", c)
                want_key = False
            elif c == 0x7D:  # }
                if len(items) == 1:
                    is_set = True
                break
            else:
                self.error("in a dict or set", c)
        try:
            if is_set:
                return set(items)
            if len(items) % 2:
                self.error("in a dict with an odd number of items", c)
            return dict(zip(items[0::2], items[1::2]))
        except TypeError as exc:  # unhashable key: pickle.loads fails the same way
            raise ValueError(f"RETURNN's .py list has an unhashable dict key or set item: {exc}") from None

    def parse_num(self, first: int) -> Tuple[int, Any]:
        data = self.data
        end = self.pos
        while end < len(data) and data[end] in _NUM_CHARS:
            end += 1
        text = data[self.pos - 1:end].decode("ascii")
        c = data[end] if end < len(data) else -1
        self.pos = end + 1 if end < len(data) else end
        try:
            if "." in text:
                self.out_size += 9  # BINFLOAT
                return c, float(text)
            value = int(text)
        except ValueError:
            raise ValueError(f"RETURNN's .py parser misreads or crashes on the number {text!r}") from None
        if not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"RETURNN's .py parser crashes on the number {text!r} (beyond 64 bits)")
        low = value & 0xFFFFFFFF  # RETURNN writes only the low 32 bits
        if low >> 16:
            self.out_size += 5  # BININT, signed
            return c, low - (1 << 32) if low >> 31 else low
        self.out_size += 3 if low >> 8 else 2  # BININT2, BININT1: unsigned
        return c, low
