"""File lists written by i6_shard are read back by RETURNN's own DistributeFilesDataset
as the same list; i6_shard reads any list file as RETURNN does, including RETURNN's
native .py parser and its failures."""

import json
import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core.io.file_list import normalize_file_tree
from i6_shard.core import read_file_list, write_file_list
from i6_shard.core.io.file_list import parse_returnn_py_literal
from tests.strategies import file_names, file_trees, odd_names
from tests.deps import RETURNN_REASON

distrib_files = pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
literal_py_to_pickle = pytest.importorskip("returnn.util.literal_py_to_pickle", reason=RETURNN_REASON)


def get_sub_epoch_dataset(files):
    return {"class": "HDFDataset", "files": files, "seq_ordering": "default"}


def returnn_reads(path):
    """The list as RETURNN's DistributeFilesDataset loads it from ``files=path``."""
    ds = distrib_files.DistributeFilesDataset(
        files=path, get_sub_epoch_dataset=get_sub_epoch_dataset, use_worker_proc=False
    )
    ds._lazy_init_file_list()
    return ds._files


def returnn_literal_eval(data: bytes):
    """("ok", repr(value)) or ("error",) from RETURNN's native .py parser."""
    try:
        return "ok", repr(literal_py_to_pickle.literal_eval(data))
    except Exception:  # AssertionError from the parser, UnicodeDecodeError/TypeError from pickle
        return ("error",)


def ours_literal_eval(data: bytes):
    try:
        return "ok", repr(parse_returnn_py_literal(data))
    except ValueError:
        return ("error",)


def _has_tuple(x):
    if isinstance(x, tuple):
        return True
    if isinstance(x, list):
        return any(map(_has_tuple, x))
    return isinstance(x, dict) and any(map(_has_tuple, x.values()))


@pytest.fixture(scope="module")
def tmpdir_m():
    with tempfile.TemporaryDirectory() as d:
        yield d


@settings(max_examples=examples(60))
@given(st.lists(file_trees(), min_size=1, max_size=6), st.sampled_from([".json", ".py"]))
def test_json_and_py_lists_read_back_by_returnn(tmpdir_m, trees, ext):
    path = os.path.join(tmpdir_m, "list" + ext)
    write_file_list(trees, path)
    expected = [normalize_file_tree(t) for t in trees]
    got = returnn_reads(path)
    assert got == expected
    assert read_file_list(path) == expected
    assert not _has_tuple(got)  # tuples come back as lists
    assert [distrib_files._get_key_for_file_tree(t) for t in got] == [
        distrib_files._get_key_for_file_tree(t) for t in trees
    ]


@settings(max_examples=examples(30))
@given(st.lists(odd_names, min_size=1, max_size=4), st.sampled_from([".json", ".py"]))
def test_names_with_lone_surrogates_survive_json_and_py(tmpdir_m, names, ext):
    path = os.path.join(tmpdir_m, "odd" + ext)
    write_file_list(names, path)
    assert returnn_reads(path) == names == read_file_list(path)


@settings(max_examples=examples(80))
@given(st.lists(file_names | odd_names, min_size=1, max_size=5))
def test_txt_list_holds_exactly_what_returnn_reads_back(tmpdir_m, names):
    """Names the .txt writer accepts come back from RETURNN unchanged; for names it
    rejects, writing them anyway would indeed not come back."""
    path = os.path.join(tmpdir_m, "list.txt")
    try:
        write_file_list(names, path)
    except ValueError as exc:
        bad = [n for n in names if f"({n!r})" in str(exc)]
        assert len(bad) >= 1
        with open(path, "wb") as f:
            f.write(bad[0].encode("utf-8", "surrogatepass") + b"\nz\n")
        try:
            assert returnn_reads(path) != [bad[0], "z"]
        except UnicodeDecodeError:
            pass
        return
    assert returnn_reads(path) == names == read_file_list(path)


def test_txt_with_comments_blank_lines_and_blanks_parses_as_returnn(tmpdir_m):
    path = os.path.join(tmpdir_m, "hand.txt")
    with open(path, "w") as f:
        f.write("# header\n\n  /data/a.hdf  \n\t/data/b c.hdf\n #indented comment\n/data/#c.hdf\r\n\n   \n")
    # Lines are stripped before the '#' test, so " #..." is a comment as well.
    assert read_file_list(path) == returnn_reads(path) == ["/data/a.hdf", "/data/b c.hdf", "/data/#c.hdf"]


@settings(max_examples=examples(40))
@given(st.lists(st.text(alphabet="ab #\t\r\n é", max_size=8), max_size=8).map("\n".join))
def test_any_txt_content_reads_as_returnn(tmpdir_m, text):
    path = os.path.join(tmpdir_m, "any.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text + "\nlast")
    assert read_file_list(path) == returnn_reads(path)


@settings(max_examples=examples(40))
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
        max_leaves=8,
    ).map(lambda x: [x])
)
def test_any_json_list_reads_as_returnn(tmpdir_m, value):
    path = os.path.join(tmpdir_m, "any.json")
    with open(path, "w") as f:
        json.dump(value, f)
    assert read_file_list(path) == returnn_reads(path)


# -- RETURNN's native .py parser: fuzzed text, the same result or the same failure --------

_ESCAPES = [
    "\\n",
    "\\t",
    "\\r",
    "\\\\",
    "\\'",
    '\\"',
    "\\x41",
    "\\xe9",
    "\\xAB",
    "\\u00e9",
    "\\ud800",
    "\\U0001f600",
    "\\U00110000",
    "\\q",
    "\\\n",
    "\\x4",
    "\\0",
    "\\a",
]
_str_body = st.lists(st.sampled_from(["a", "é", "😀", " ", "\n", "'", '"', "/", ":"] + _ESCAPES), max_size=5).map(
    "".join
)
_str_lit = st.tuples(st.sampled_from(["'", '"']), _str_body).map(lambda q: q[0] + q[1] + q[0])
_num_lit = st.integers(-(2**40), 2**40).map(str) | st.sampled_from(
    ["1.5", "-0.25", "65536", "4294967295", "2147483648"]
)
_sep = st.sampled_from([",", ", ", " , ", ",,", ",\n"])


def _render_seq(items, seps, open_, close):
    return open_ + "".join(i + s for i, s in zip(items, seps)) + close


def _containers(children):
    return st.one_of(
        st.lists(st.tuples(children, _sep), max_size=3).map(
            lambda xs: _render_seq([x for x, _ in xs], [s for _, s in xs], "[", "]")
        ),
        st.lists(st.tuples(children, _sep), max_size=3).map(
            lambda xs: _render_seq([x for x, _ in xs], [s for _, s in xs], "(", ")")
        ),
        st.lists(st.tuples(_str_lit, children, _sep), max_size=3).map(
            lambda xs: "{" + "".join(f"{k}: {v}{s}" for k, v, s in xs) + "}"
        ),
        st.lists(st.tuples(_str_lit, _sep), min_size=1, max_size=3).map(
            lambda xs: "{" + "".join(k + s for k, s in xs) + "}"
        ),
    )


_py_text = st.recursive(_str_lit | _num_lit | st.sampled_from(["None", "True"]), _containers, max_leaves=8)
# Noise never adds number characters: RETURNN's parser aborts the process on a malformed number.
_NUM_CHARS = "+-.0123456789"
_noise = st.sampled_from(["'", '"', "\\", "[", "]", "{", "}", ",", ":", " ", "#", "(", "N", "x", "\n", "\xff"])


@settings(max_examples=examples(300))
@given(_py_text, st.lists(st.tuples(st.integers(0, 10**6), _noise), max_size=2), st.sampled_from(["", " junk", "\n"]))
def test_py_parser_matches_returnn_on_fuzzed_text(text, noise, tail):
    for pos, ch in noise:
        pos %= len(text) + 1
        if 0 < pos < len(text) and text[pos - 1] in _NUM_CHARS and text[pos] in _NUM_CHARS:
            continue  # splitting a number can leave "-" or ".", on which RETURNN's parser aborts the process
        text = text[:pos] + ch + text[pos:]
    data = (text + tail).encode("utf-8", "surrogatepass").replace("\xff".encode(), b"\xff")
    assert ours_literal_eval(data) == returnn_literal_eval(data)


def test_py_parser_quirks_match_returnn():
    for text in [
        b"[,,'a',,]",
        b"{'a'}",
        b"{'a':,}",
        b"['a'] junk",
        b"[\"it's\", '\\x41\\u00e9']",
        b" [ None , ] ",
        b"[('a',)]",
        b"[True]",
        b"# c\n['a']",
        b"['\\xAB']",
        b"['a' 'b']",
        b"'a'",
        b"",
        b"[65536, 4294967295, 2147483648, -3, 2.5]",
        b"['\\\n']",
        b"[{'a': ['b']}, {'b': 'c', 'a': 'd'}]",
    ]:
        assert ours_literal_eval(text) == returnn_literal_eval(text), text


@pytest.mark.parametrize("text", [b"[-]", b"[.]", b"[1-2]", b"[1.2.3]", b"[99999999999999999999]", b"['\\U00110000']"])
def test_py_numbers_and_escapes_returnn_would_crash_or_misread_are_rejected(text):
    with pytest.raises(ValueError, match="RETURNN's .py parser"):
        parse_returnn_py_literal(text)


def test_long_names_py_list_fits_returnn_buffer(tmpdir_m):
    """RETURNN's parser has room for input + 1000 bytes of pickle; a str over 255 bytes
    takes 3 more bytes there than in repr, so a plain repr of many long names fails in RETURNN."""
    names = [f"/very/long/{'x' * 300}/{i}.hdf" for i in range(1500)]
    naive = os.path.join(tmpdir_m, "naive.py")
    with open(naive, "w") as f:
        f.write(repr(names))
    with pytest.raises(AssertionError):
        returnn_reads(naive)
    with pytest.raises(ValueError, match="overflow"):
        read_file_list(naive)
    path = os.path.join(tmpdir_m, "long.py")
    write_file_list(names, path)
    assert returnn_reads(path) == names == read_file_list(path)


def test_dict_keys_must_be_str_for_json_and_py(tmpdir_m):
    for ext in (".json", ".py"):
        with pytest.raises(ValueError, match="entry 1 has dict key 1 of type int"):
            write_file_list(["a", {1: "b"}], os.path.join(tmpdir_m, "keys" + ext))


def test_txt_holds_only_plain_names(tmpdir_m):
    with pytest.raises(ValueError, match="entry 1 is a tuple"):
        write_file_list(["a", ("b", "c")], os.path.join(tmpdir_m, "t.txt"))


def test_unknown_extension_is_rejected_both_ways(tmpdir_m):
    path = os.path.join(tmpdir_m, "list.csv")
    with open(path, "w") as f:
        f.write("a\n")
    with pytest.raises(ValueError, match=r"'\.csv'.*\.txt, \.json, \.py"):
        read_file_list(path)
    with pytest.raises(ValueError, match=r"'\.csv'"):
        write_file_list(["a"], path)
    with pytest.raises(ValueError, match="extension ''"):
        read_file_list(os.path.join(tmpdir_m, "noext"))
    with pytest.raises(ValueError):  # RETURNN rejects it too
        returnn_reads(path)


@pytest.mark.parametrize(
    "ext,content",
    [
        (".json", '{"a": "b"}'),
        (".json", '"a"'),
        (".py", "'a'"),
        (".py", "{'a': 'b'}"),
        (".json", "not json"),
        (".py", "[oops]"),
    ],
)
def test_content_that_is_not_a_list_is_rejected_as_by_returnn(tmpdir_m, ext, content):
    path = os.path.join(tmpdir_m, "bad" + ext)
    with open(path, "w") as f:
        f.write(content)
    with pytest.raises(ValueError, match=repr(path).replace("\\", "\\\\").replace(".", r"\.")):
        read_file_list(path)
    with pytest.raises(Exception):
        returnn_reads(path)


def test_missing_list_file(tmpdir_m):
    path = os.path.join(tmpdir_m, "nope.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt.*does not exist"):
        read_file_list(path)


@pytest.mark.parametrize("ext", [".txt", ".json", ".py"])
def test_a_directory_is_not_a_list_file(tmp_path, ext):
    path = tmp_path / f"files{ext}"
    path.mkdir()
    with pytest.raises(ValueError, match=r"files\.\w+' is a directory; give the path of a \.txt/\.json/\.py file"):
        read_file_list(path)


def test_txt_list_that_is_not_utf8_names_the_file_and_suggests_json(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("/data/caf\u00e9.hdf\n".encode("latin-1"))
    with pytest.raises(UnicodeDecodeError):  # RETURNN fails on it too, naming neither file nor fix
        returnn_reads(str(path))
    with pytest.raises(ValueError, match=r"latin1\.txt' is not valid utf-8 text .*write the list as \.json"):
        read_file_list(path)


def test_write_is_atomic_and_leaves_no_temp_files(tmpdir_m):
    d = os.path.join(tmpdir_m, "atomic")
    os.makedirs(d)
    write_file_list(["a", "b"], os.path.join(d, "l.txt"))
    with pytest.raises(ValueError):
        write_file_list(["a", ""], os.path.join(d, "l.txt"))
    assert os.listdir(d) == ["l.txt"]
    assert read_file_list(os.path.join(d, "l.txt")) == ["a", "b"]
