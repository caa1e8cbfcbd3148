"""Port of RETURNN's native ``.py`` file-list parser (``returnn/util/literal_py_to_pickle``,
``py-to-pickle.cpp``), quirks included, so that a list is accepted exactly when RETURNN accepts it."""

from __future__ import annotations

import re
from typing import Any, List, Tuple

# RETURNN's py_to_pickle allocates len(input) + 1000 bytes for the pickle it writes.
RETURNN_OUT_SLACK = 1000
# isspace() in the C locale; RETURNN's parser skips these between items.
_WS = b" \t\n\v\f\r"
_SKIP_WS = re.compile(rb"[ \t\n\v\f\r]*")
_STR_BODY = {
    ord("'"): re.compile(rb"[^'\\]*(?:\\[\s\S][^'\\]*)*'"),
    ord('"'): re.compile(rb'[^"\\]*(?:\\[\s\S][^"\\]*)*"'),
}
_ESCAPE = re.compile(rb"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|([\s\S]))")
_SIMPLE_ESCAPES = {
    ord("r"): b"\r",
    ord("t"): b"\t",
    ord("n"): b"\n",
    ord("\\"): b"\\",
    ord('"'): b'"',
    ord("'"): b"'",
    ord("\n"): b"\n",
}
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
    return parse_with_output_size(data, check_buffer=True)[0]


def parse_with_output_size(data: bytes, *, check_buffer: bool) -> Tuple[Any, int]:
    parser = _PyParser(data)
    c, had_item, value = parser.parse()
    if not had_item:
        parser.error("at the top", c)
    size = parser.out_size + 1  # + STOP
    if check_buffer and size > len(data) + RETURNN_OUT_SLACK:
        raise ValueError(
            f"RETURNN's .py parser would overflow its output buffer ({size} bytes of pickle for "
            f"{len(data)} bytes of input, it has room for {len(data) + RETURNN_OUT_SLACK}); "
            "rewrite the list with write_file_list (which pads it) or use .json"
        )
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
                if data[self.pos : self.pos + 3] != b"one":
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
            raise ValueError(
                f"RETURNN's .py parser fails on escape {m.group().decode('utf-8', 'replace')!r} "
                "(it knows only \\r \\t \\n \\\\ \\' \\\" and lowercase \\x \\u \\U)"
            )
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
        text = data[self.pos - 1 : end].decode("ascii")
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
