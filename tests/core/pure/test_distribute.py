"""distribute_evenly_by_size and shuffle_order: invariants, and bin-for-bin parity with
RETURNN's DistributeFilesDataset._distribute_evenly_by_size on its own cases and fuzzed ones."""

from typing import List

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core.pure import check_enough_files
from i6_shard.core.pure.distribute import full_epoch_seed
from i6_shard.core.pure.distribute import shuffle_order
from i6_shard.core.pure.distribute import distribute_evenly_by_size
from tests.strategies import file_sizes


def returnn_bins(files: List[str], sizes_by_name: dict, num_bins: int) -> List[List[str]]:
    """RETURNN's own bins; only the parity tests need RETURNN, the invariants run without it."""
    distrib_files = pytest.importorskip(
        "returnn.datasets.distrib_files", reason="parity tests need RETURNN: pip install returnn dm-tree"
    )
    return distrib_files.DistributeFilesDataset._distribute_evenly_by_size(
        num_bins=num_bins, file_sizes=sizes_by_name, files_order=files
    )


def our_bins(files: List[str], sizes_by_name: dict, num_bins: int) -> List[List[str]]:
    bounds = distribute_evenly_by_size(
        np.array([sizes_by_name[f] for f in files], dtype=np.int64), num_bins=num_bins
    ).tolist()
    assert len(bounds) == num_bins + 1
    return [files[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


# RETURNN's test_DistributeFilesDataset_distribute_evenly_by_size, case by case (sizes, num_bins, files).
RETURNN_CASES = [
    ([1, 10, 1, 1], 3, None),
    ([1, 1, 78, 120], 4, None),
    ([1, 1, 1, 56, 141], 5, None),
    ([1, 1, 1, 56, 141], 4, None),
    ([5, 5] + [10] * 7, 5, None),
    ([1] * 29, 8, None),
    ([1], 5, ["file"] * 10),  # duplicate files
]


@pytest.mark.parametrize("sizes, num_bins, files", RETURNN_CASES)
def test_returnn_own_cases(sizes, num_bins, files):
    if files is None:
        files = [f"file-{i}" for i in range(len(sizes))]
    by_name = dict(zip(files, sizes))
    assert our_bins(files, by_name, num_bins) == returnn_bins(files, by_name, num_bins)


def test_returnn_stddev_case_on_integer_sizes():
    # RETURNN's stddev case uses float sizes; bytes are integers, so compare on the rounded sizes.
    sizes = np.round(np.random.RandomState(42).uniform(low=97, high=103, size=(100,)) * 1000).astype(np.int64)
    files = [f"file-{i}" for i in range(100)]
    by_name = dict(zip(files, sizes.tolist()))
    ours = our_bins(files, by_name, 20)
    assert ours == returnn_bins(files, by_name, 20)
    totals = [sum(by_name[f] for f in b) for b in ours]
    assert np.std(totals) <= 0.03 * sizes.sum() / 20


def test_float_sizes_are_rejected():
    with pytest.raises(TypeError, match="integers"):
        distribute_evenly_by_size(np.array([1.5, 2.0]), num_bins=1)


@st.composite
def parity_cases(draw):
    """Files with zero sizes, equal sizes and duplicate entries; num_bins from 1 to num_files.

    Hypothesis draws the shape of a case and a seed; numpy fills in the sizes (drawing every
    size through hypothesis would make 2000+ cases too slow for the suite).
    """
    num_names = draw(st.integers(1, 30))
    top = draw(st.sampled_from([0, 1, 3, 100, 10**6, 10**12, 10**17]))
    zero_share = draw(st.sampled_from([0.0, 0.3, 0.9]))
    duplicates = draw(st.booleans())
    rng = np.random.RandomState(draw(st.integers(0, 2**32 - 1)))
    name_sizes = [int(x) for x in rng.randint(0, top + 1, size=num_names, dtype=np.int64)]
    name_sizes = [0 if rng.rand() < zero_share else x for x in name_sizes]
    idx = rng.randint(0, num_names, size=rng.randint(1, 46)).tolist() if duplicates else list(range(num_names))
    files = [f"f{i}" for i in idx]
    num_bins = draw(st.integers(1, len(files)))
    return files, {f"f{i}": s for i, s in enumerate(name_sizes)}, num_bins


@settings(max_examples=examples(800))
@given(parity_cases())
def test_parity_with_returnn_fuzzed(case):
    files, by_name, num_bins = case
    assert our_bins(files, by_name, num_bins) == returnn_bins(files, by_name, num_bins)


@settings(max_examples=examples(300))
@given(file_sizes, st.data())
def test_bins_are_contiguous_nonempty_and_cover_everything(sizes, data):
    num_bins = data.draw(st.integers(1, len(sizes)))
    bounds = distribute_evenly_by_size(np.array(sizes, dtype=np.int64), num_bins=num_bins)
    assert bounds.dtype == np.int64 and bounds.shape == (num_bins + 1,)
    assert bounds[0] == 0 and bounds[-1] == len(sizes)
    assert np.all(np.diff(bounds) >= 1)


def test_edge_cases_num_bins_equal_num_files_and_one_bin():
    sizes = np.array([7, 0, 3, 3, 0], dtype=np.int64)
    assert distribute_evenly_by_size(sizes, num_bins=5).tolist() == [0, 1, 2, 3, 4, 5]
    assert distribute_evenly_by_size(sizes, num_bins=1).tolist() == [0, 5]


def test_too_few_files_names_the_values_and_the_fix():
    with pytest.raises(
        ValueError,
        match=r"3 files cannot fill num_shards\*partition_epoch=2\*2=4 bins.*"
        r"partition_epoch to at most 1",
    ):
        check_enough_files(3, num_shards=2, partition_epoch=2)
    with pytest.raises(ValueError, match="3 files cannot fill num_bins=4"):
        distribute_evenly_by_size(np.array([1, 2, 3]), num_bins=4)


@pytest.mark.parametrize("num_files", [0, 1, 3, 7, 12])
@pytest.mark.parametrize("num_shards", [1, 2, 5])
@pytest.mark.parametrize("partition_epoch", [1, 4, 13])
def test_the_hint_for_too_few_files_works_when_followed(num_files, num_shards, partition_epoch):
    import re

    if num_files >= num_shards * partition_epoch:
        check_enough_files(num_files, num_shards=num_shards, partition_epoch=partition_epoch)
        return
    with pytest.raises(ValueError) as info:
        check_enough_files(num_files, num_shards=num_shards, partition_epoch=partition_epoch)
    hint = str(info.value).split("sub-epoch. ", 1)[1]
    if num_files == 0:
        assert hint.startswith("The file list is empty") and "shards" not in hint
        return
    assert ("shards" in hint) is (num_shards > 1)  # "use fewer shards" only where there are several
    max_p = re.search(r"partition_epoch to at most (\d+)", hint)
    max_w = re.search(r"Use at most (\d+) shards \(with partition_epoch=1\)", hint)
    assert (max_p is None) != (max_w is None), hint
    if max_p:  # the largest partition_epoch that works
        check_enough_files(num_files, num_shards=num_shards, partition_epoch=int(max_p[1]))
        with pytest.raises(ValueError):
            check_enough_files(num_files, num_shards=num_shards, partition_epoch=int(max_p[1]) + 1)
    else:  # the largest number of shards that works
        check_enough_files(num_files, num_shards=int(max_w[1]), partition_epoch=1)
        with pytest.raises(ValueError):
            check_enough_files(num_files, num_shards=int(max_w[1]) + 1, partition_epoch=1)


@settings(max_examples=examples(50))
@given(st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_shuffle_order_is_returnn_list_shuffle(num_files, seed):
    files = [f"x{i}" for i in range(num_files)]
    ref = list(files)
    np.random.RandomState(seed).shuffle(ref)
    assert [files[i] for i in shuffle_order(num_files, seed=seed).tolist()] == ref


def test_full_epoch_seed_matches_returnn_dataset():
    Dataset = pytest.importorskip(
        "returnn.datasets.basic", reason="parity tests need RETURNN: pip install returnn dm-tree"
    ).Dataset

    for partition_epoch, offset, fixed in [(1, 0, None), (5, 0, None), (3, 16127, None), (4, 0, 42)]:
        ds = Dataset(partition_epoch=partition_epoch, random_seed_offset=offset, fixed_random_seed=fixed)
        for full in range(4):
            expected = ds._get_random_seed_for_epoch(full * partition_epoch + 1)
            assert full_epoch_seed(full, random_seed_offset=offset, fixed_random_seed=fixed) == expected
