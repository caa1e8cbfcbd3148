"""Hypothesis strategies shared by the tests: file names, file trees, sizes."""

from hypothesis import strategies as st

# File names with unicode, separators (':' '/'), quotes, backslashes, blanks and newlines;
# never empty, never NUL, no lone surrogates (see odd_names for those).
file_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=12
) | st.lists(st.sampled_from(["a", ":", "/", "'", '"', "\\", " ", "\n", "\r", "#", "é", "€", "😀", "\\x41", "\t"]),
             min_size=1, max_size=6).map("".join)

# Names as os.listdir returns them for undecodable bytes too (lone surrogates from surrogateescape).
odd_names = st.text(alphabet=st.characters(blacklist_characters="\0"), min_size=1, max_size=12)

dict_keys = st.text(alphabet="abcdefgh_:/", min_size=1, max_size=4) | st.text(max_size=4)


def file_trees(leaves=file_names, max_leaves: int = 6):
    """A str, or nested tuple/list/dict of str (what DistributeFilesDataset accepts as one entry)."""
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3),
            st.lists(children, min_size=1, max_size=3).map(tuple),
            st.dictionaries(dict_keys, children, min_size=1, max_size=3),
        ),
        max_leaves=max_leaves,
    )


# Names that can be created in one directory: no '/', not '.' or '..', at most 40 UTF-8 bytes.
fs_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"), min_size=1, max_size=10
).filter(lambda s: s not in (".", "..") and len(s.encode("utf-8")) <= 40)

# Sizes as RETURNN sees them: bytes, zeros and duplicates included.
file_sizes = st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=60)
