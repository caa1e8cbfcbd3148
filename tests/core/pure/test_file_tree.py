"""flatten / tree_key against dm-tree and RETURNN on fuzzed trees, and the rejection of
entries RETURNN would choke on, with the entry's index in the error."""

import collections
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from i6_shard.core.pure import check_file_trees, flatten
from i6_shard.core import tree_key
from i6_shard.core.pure.file_tree import flatten_file_trees, leaves_and_keys
from tests.strategies import dict_keys, file_names, file_trees, odd_names

tree = pytest.importorskip("tree", reason="needs dm-tree: pip install dm-tree")
distrib_files = pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")


def _with_ordered_dicts(t):
    """The same tree with every dict an OrderedDict in reversed insertion order."""
    if isinstance(t, dict):
        return collections.OrderedDict((k, _with_ordered_dicts(v)) for k, v in reversed(list(t.items())))
    if isinstance(t, (list, tuple)):
        return type(t)(_with_ordered_dicts(v) for v in t)
    return t


@given(file_trees())
def test_flatten_and_key_match_dm_tree_and_returnn(t):
    assert flatten(t) == tree.flatten(t)
    assert tree_key(t) == distrib_files._get_key_for_file_tree(t)
    ordered = _with_ordered_dicts(t)
    assert flatten(ordered) == tree.flatten(ordered)


@given(file_trees(leaves=odd_names))
def test_lone_surrogates_and_odd_unicode_match_too(t):
    assert tree_key(t) == distrib_files._get_key_for_file_tree(t)


@given(st.lists(file_trees(), max_size=8))
def test_list_level_fast_path_matches_per_tree_flatten(trees):
    leaves, keys = leaves_and_keys(trees)
    assert [list(x) for x in leaves] == [tree.flatten(t) for t in trees]
    assert keys == [distrib_files._get_key_for_file_tree(t) for t in trees]
    assert [list(x) for x in flatten_file_trees(trees)] == [tree.flatten(t) for t in trees]
    check_file_trees(trees)


def test_dict_with_several_keys_is_flattened_by_sorted_key():
    t = {"b": "2", "a": ("1a", "1b"), "c": {"z": "3z", "y": "3y"}}
    assert flatten(t) == tree.flatten(t) == ["1a", "1b", "2", "3y", "3z"]


def test_separators_inside_names_make_keys_ambiguous_as_in_returnn():
    assert tree_key("a:b") == tree_key(("a", "b")) == distrib_files._get_key_for_file_tree(("a", "b"))


class _StrSub(str):
    pass


def test_str_subclass_leaves_are_accepted():
    trees = [(_StrSub("a"), "b"), [_StrSub("c")]]
    check_file_trees(trees)
    assert leaves_and_keys(trees)[1] == ["a:b", "c"]


# Each bad leaf, the error it gives, and a word its message must contain.
BAD_LEAVES = [
    (None, TypeError, "NoneType"),
    (3, TypeError, "int"),
    (pathlib.Path("/data/x.hdf"), TypeError, "str()"),
    (b"bytes.hdf", TypeError, "bytes"),
    (1.5, TypeError, "float"),
    ("", ValueError, "empty file name"),
    ("a\0b", ValueError, "NUL"),
    ([], ValueError, "empty list"),
    ((), ValueError, "empty tuple"),
    ({}, ValueError, "empty dict"),
]


def _place(bad, good, how):
    return {
        "bare": lambda: bad,
        "list": lambda: [good, bad],
        "tuple": lambda: (bad, good),
        "dict": lambda: {"a": good, "b": bad},
        "deep": lambda: [good, {"k": (good, [bad])}],
    }[how]()


@given(
    st.lists(file_trees(), min_size=1, max_size=6),
    st.data(),
    st.sampled_from(BAD_LEAVES),
    st.sampled_from(["bare", "list", "tuple", "dict", "deep"]),
)
def test_bad_entries_are_rejected_naming_the_entry_index(trees, data, bad_case, how):
    bad, exc_type, word = bad_case
    idx = data.draw(st.integers(0, len(trees) - 1))
    trees = list(trees)
    trees[idx] = _place(bad, data.draw(file_names), how)
    for fn in (check_file_trees, flatten_file_trees, leaves_and_keys):
        with pytest.raises(exc_type) as info:
            fn(trees)
        assert f"entry {idx} " in str(info.value)
        assert word in str(info.value)


def test_first_bad_entry_is_the_one_named():
    with pytest.raises(TypeError, match="entry 1 "):
        check_file_trees(["a", ("b", None), None])


def test_unsortable_dict_keys_are_rejected():
    with pytest.raises(TypeError, match="entry 0 .*cannot be sorted"):
        check_file_trees([{1: "a", "b": "c"}])
    with pytest.raises(TypeError):  # dm-tree fails on them too
        tree.flatten({1: "a", "b": "c"})


@pytest.mark.parametrize("not_a_list", ["a.hdf", None, {"a": "b"}, 3])
def test_files_must_be_a_list(not_a_list):
    with pytest.raises(TypeError, match="files must be a list"):
        check_file_trees(not_a_list)


@given(dict_keys)
def test_dict_keys_do_not_enter_the_key(k):
    assert tree_key({k: "x"}) == "x"
