"""check_sample_unchanged: a random sample of files is stat-ed again and compared with the sizes
archive; files resized, touched, replaced or removed since are named; the cost is one stat per
leaf of the sample, whatever the length of the list."""

import os

import numpy as np
import pytest

from i6_shard.core import collect_file_sizes, load_file_sizes, save_file_sizes
from i6_shard.core.io import file_sizes as file_sizes_mod
from i6_shard.core.io import stale_sizes
from i6_shard.core.io.stale_sizes import StaleFileSizesError, check_sample_unchanged


@pytest.fixture
def files(tmp_path):
    paths = []
    for i in range(40):
        p = tmp_path / f"part {i}.hdf"
        p.write_bytes(b"x" * (i + 1))
        paths.append(str(p))
    return paths


def trees_of(paths):
    return paths[:20] + [(paths[i], paths[i + 1]) for i in range(20, 40, 2)]


def test_unchanged_files_pass_and_every_sample_size_is_checked(files, tmp_path):
    trees = trees_of(files)
    save_file_sizes(collect_file_sizes(trees), tmp_path / "s.npz")
    fs = load_file_sizes(tmp_path / "s.npz")
    for seed in range(5):
        assert check_sample_unchanged(fs, trees=trees, num_samples=8, seed=seed) == 8
    assert check_sample_unchanged(fs, trees=trees, num_samples=1000) == len(trees)  # all of a short list
    assert check_sample_unchanged(fs, trees=trees, num_samples=0) == 0


@pytest.mark.parametrize("change", ["resize", "touch", "replace", "remove"])
def test_a_changed_file_in_the_sample_is_named(files, change):
    trees = trees_of(files)
    fs = collect_file_sizes(trees)
    victim = files[25]  # a leaf of entry 22, (files[24], files[25])
    if change == "resize":
        with open(victim, "ab") as f:
            f.write(b"more")
    elif change == "touch":  # same bytes, new modification time
        st = os.stat(victim)
        os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    elif change == "replace":  # another file of the same size, written later
        os.replace(victim, victim + ".old")
        with open(victim, "wb") as f:
            f.write(b"y" * 26)
        st = os.stat(victim + ".old")
        os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    else:
        os.unlink(victim)
    with pytest.raises(StaleFileSizesError) as info:
        check_sample_unchanged(fs, trees=trees, num_samples=len(trees), source="sizes.npz")
    err = info.value
    assert [i for i, _ in err.changed] == [22]
    msg = str(err)
    assert msg.startswith(
        f"sizes.npz is stale: 1 of {len(trees)} sampled entries changed since their sizes were computed (entry 22 "
    )
    assert "compute the sizes again" in msg
    expected = {
        "resize": "51 bytes then, 55 now",
        "touch": "modified ",
        "replace": "modified ",
        "remove": "cannot be stat-ed now: No such file or directory",
    }[change]
    assert expected in msg
    if change == "resize":
        assert "modified" not in msg or "then" in msg


def test_without_recorded_mtimes_only_sizes_are_compared(files):
    fs = collect_file_sizes(files)
    old_format = file_sizes_mod.FileSizes(keys=fs.keys, sizes=fs.sizes)  # as loaded from a format 1 archive
    st = os.stat(files[3])
    os.utime(files[3], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert check_sample_unchanged(old_format, trees=files, num_samples=40) == 40
    with pytest.raises(StaleFileSizesError):
        check_sample_unchanged(fs, trees=files, num_samples=40)


def test_the_cost_is_one_stat_per_sampled_leaf_whatever_the_list_length(monkeypatch):
    num = 1_000_000  # no such files: only the sample is ever stat-ed
    keys = [f"/data/f{i}.hdf" for i in range(num)]
    fs = file_sizes_mod.FileSizes(keys=keys, sizes=np.zeros(num, dtype=np.int64))
    calls = []

    class FakeStat:
        st_size, st_mtime_ns = 0, 0

    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        if isinstance(path, str) and path.startswith("/data/f"):
            calls.append(path)
            return FakeStat()
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    assert check_sample_unchanged(fs, trees=keys, num_samples=16, seed=3) == 16
    assert len(calls) == len(set(calls)) == 16
    calls.clear()
    check_sample_unchanged(fs, trees=keys, num_samples=16, seed=4)
    assert len(calls) == 16  # another rank, another sample
    draws = []

    class Recording(np.random.RandomState):
        def randint(self, *args, **kwargs):
            draws.append(args)
            return super().randint(*args, **kwargs)

        def permutation(self, *args, **kwargs):
            pytest.fail("permuted the whole list")

        def choice(self, *args, **kwargs):
            pytest.fail("chose from the whole list")

    monkeypatch.setattr(np.random, "RandomState", Recording)
    check_sample_unchanged(fs, trees=keys, num_samples=16, seed=5)
    assert len(draws) == 16


def test_samples_are_distinct_deterministic_and_cover_the_list():
    seen = set()
    for seed in range(200):
        idx = stale_sizes._sample_indices(50, 5, seed)
        assert idx == sorted(set(idx)) and len(idx) == 5 and all(0 <= i < 50 for i in idx)
        assert idx == stale_sizes._sample_indices(50, 5, seed)
        seen.update(idx)
    assert seen == set(range(50))


def test_trees_that_do_not_fit_the_sizes_are_refused(files):
    fs = collect_file_sizes(files)
    with pytest.raises(ValueError, match="39 file trees for 40 sizes"):
        check_sample_unchanged(fs, trees=files[1:], num_samples=3)
    with pytest.raises(ValueError, match="has another key than the file sizes archive"):
        check_sample_unchanged(fs, trees=files[::-1], num_samples=40)


def test_stale_error_survives_pickling():
    """A DataLoader worker re-raises it in the main process through pickle (and torch's ExceptionWrapper
    rebuilds it from the message alone): both must keep the message instead of failing with a TypeError."""
    import pickle

    err = StaleFileSizesError("file_sizes 'x.npz' is stale: entry 1", [(1, "modified")])
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and isinstance(back, StaleFileSizesError)
    assert str(StaleFileSizesError(str(err))) == str(err)
