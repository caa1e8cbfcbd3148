"""Costs archives that contradict themselves are refused wherever they are loaded (``load_file_costs``,
``load_file_sizes``, so the plan and the RETURNN-side class too), naming the archive; batching limits that make
every cost 0 and a frame rate of 1e300 are refused naming the option and the useful range."""

import os

import numpy as np
import pytest

from i6_shard import core
from i6_shard.cli import main
from i6_shard.core.io.file_costs import collect_file_costs, load_file_costs
from i6_shard.core.pure.batching import Batching, file_millisteps
from i6_shard.core.pure.costs_consistency import MAX_FRAME_RATE, check_frame_rate, useful_batching_problem

pytest.importorskip("h5py", reason="the costs are read from HDF files: pip install h5py")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("costs_consistency")
    assert main(["make-data", "-o", str(d / "data"), "--num-files", "16", "--seed", "5"]) == 0
    lst = str(d / "data" / "files.txt")
    assert main(["costs", lst, "--unit", "steps", "--batch-size", "300", "-o", str(d / "steps.npz")]) == 0
    assert main(["costs", lst, "--unit", "frames", "-o", str(d / "frames.npz")]) == 0
    return d


def _edit(src, dst, edit):
    with np.load(src) as f:
        data = {k: f[k] for k in f.files}
    np.savez(dst, **edit(data))
    return str(dst)


def _shuffle_lengths(d):
    """The per-sequence lengths moved between files, the per-file counts kept."""
    return {**d, "seq_lengths": np.random.RandomState(0).permutation(d["seq_lengths"])}


def _shuffle_lengths_and_totals(d):
    """As above, with num_frames made to match: only the milli-steps give it away."""
    lengths = np.random.RandomState(0).permutation(d["seq_lengths"])
    ends = np.cumsum(d["num_seqs"])
    frames = np.array([lengths[e - n : e].astype(np.int64).sum() for e, n in zip(ends, d["num_seqs"])])
    return {**d, "seq_lengths": lengths, "num_frames": frames}


def _zero_cost(d):
    sizes = d["sizes"].copy()
    sizes[3] = 0
    return {**d, "sizes": sizes}


def _quantiles(d):
    q = d["seq_length_quantiles"].copy()
    q[-1] += 1000
    return {**d, "seq_length_quantiles": q}


EDITS = {
    "lengths moved between files": ("steps.npz", _shuffle_lengths, "sequence lengths sum to"),
    "lengths and totals moved": (
        "steps.npz",
        _shuffle_lengths_and_totals,
        "milli-steps, but its sequence lengths give",
    ),
    "a file with sequences at 0 milli-steps": ("steps.npz", _zero_cost, "entry 3 ("),
    "quantiles of other lengths": ("steps.npz", _quantiles, "the pooled length quantiles run from"),
    "frames that are not the frames": ("frames.npz", _zero_cost, "costs 0 frames, but holds"),
}


@pytest.mark.parametrize("case", list(EDITS))
def test_a_self_contradicting_archive_is_refused_by_every_reader(corpus, tmp_path, capsys, case):
    """Lengths swapped between files were accepted silently: the plan predicted 0.11% dropped for a true 0.85%."""
    name, edit, message = EDITS[case]
    path = _edit(corpus / name, tmp_path / "edited.npz", edit)
    for load in (load_file_costs, core.load_file_sizes):
        with pytest.raises(ValueError, match="contradicts itself") as info:
            load(path)
        assert str(info.value).startswith(f"{path!r} contradicts itself: ") and message in str(info.value)
    capsys.readouterr()
    argv = ["plan", "--sizes", path, "--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4", "--no-plot"]
    assert main(argv + ["-o", str(tmp_path / "plan")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path!r} contradicts itself: ") and err.count("\n") == 1, err
    assert not (tmp_path / "plan").exists()


def test_the_archives_as_written_load(corpus):
    for name in ("steps.npz", "frames.npz"):
        assert len(load_file_costs(str(corpus / name))) == 16
        assert len(core.load_file_sizes(str(corpus / name))) == 16


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--batch-size", 2**40, "batch_size=1099511627776 lets "),
        ("--max-seqs", 10**7, "max_seqs=10000000 makes "),
    ],
)
def test_batching_that_makes_every_cost_0_names_the_option(corpus, tmp_path, capsys, option, value, message):
    """--batch-size 2**40 took 9 s and 442 MB and gave every file 0 milli-steps, which the plan took as valid."""
    capsys.readouterr()
    lst = str(corpus / "data" / "files.txt")
    assert main(["costs", lst, "--unit", "steps", option, str(value), "-o", str(tmp_path / "c.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and "the largest useful" in err and err.count("\n") == 1, err
    assert not (tmp_path / "c.npz").exists()
    useful = int(err.split("the largest useful ")[1].split()[2])
    assert main(["costs", lst, "--unit", "steps", option, str(useful + 1), "-o", str(tmp_path / "c.npz")]) == 2
    assert main(["costs", lst, "--unit", "steps", option, str(useful), "-o", str(tmp_path / "c.npz")]) == 0
    assert (load_file_costs(str(tmp_path / "c.npz")).costs > 0).all()


def test_the_largest_useful_value_is_the_largest_without_a_0_cost():
    rng = np.random.RandomState(1)
    lengths = [rng.randint(20, 121, size=n) for n in (1, 3, 40)]
    for option in ("batch_size", "max_seqs"):
        big = Batching(**{"batch_size": None, "max_seqs": None, option: 10**6})
        problem = useful_batching_problem(lengths, big)
        assert problem is not None and f"the largest useful {option} is " in problem
        useful = int(problem.rsplit(" ", 1)[1])
        at = Batching(**{"batch_size": None, "max_seqs": None, option: useful})
        above = Batching(**{"batch_size": None, "max_seqs": None, option: useful + 1})
        assert (file_millisteps(lengths, at) > 0).all() and useful_batching_problem(lengths, at) is None
        assert (file_millisteps(lengths, above) == 0).any()


@pytest.mark.parametrize("rate", [1e300, float("inf"), 0, -5, MAX_FRAME_RATE + 1, True])
def test_the_frame_rate_is_bounded(tmp_path, rate):
    """--frame-rate 1e300 gave numpy's RuntimeWarning, then blamed the file as corrupt."""
    with pytest.raises(ValueError, match=r"^frame_rate=.* \(--frame-rate\) is not a rate of frames per second"):
        check_frame_rate(rate)
    with pytest.raises(ValueError, match=r"\(--frame-rate\) is not a rate of frames per second"):
        collect_file_costs([str(tmp_path / "x.zip")], unit="frames", frame_rate=rate)
    assert check_frame_rate(MAX_FRAME_RATE) == MAX_FRAME_RATE


def test_the_frame_rate_of_1e300_on_the_command_line(tmp_path, capsys):
    lst = tmp_path / "list.txt"
    lst.write_text(str(tmp_path / "corpus.zip") + "\n")
    capsys.readouterr()
    assert main(["costs", str(lst), "--frame-rate", "1e300", "-o", str(tmp_path / "c.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: frame_rate=1e+300 (--frame-rate) is not a rate of frames per second"), err
    assert os.listdir(tmp_path) == ["list.txt"]


def test_an_archive_computed_under_useless_batching_is_refused(tmp_path):
    """An archive that ``costs --batch-size 2**40`` wrote before: every cost 0, consistent with its own batching."""
    from i6_shard.core.io.file_costs import FileCosts, save_file_costs, sorted_length_quantiles

    lengths = [np.array([20, 30, 40]), np.array([50] * 5)]
    batching = Batching(batch_size=None, max_seqs=10**6)
    costs = file_millisteps(lengths, batching)
    assert (costs == 0).all()
    flat = np.concatenate(lengths)
    archive = FileCosts(
        keys=["/d/a.hdf", "/d/b.hdf"],
        costs=costs,
        unit="steps",
        num_seqs=np.array([3, 5]),
        num_frames=np.array([90, 250]),
        seq_lengths=flat.astype(np.int32),
        seq_length_quantiles=sorted_length_quantiles(flat),
        batching=batching,
    )
    path = str(tmp_path / "old.npz")
    save_file_costs(archive, path)
    for load in (load_file_costs, core.load_file_sizes):
        with pytest.raises(ValueError, match="the batching it was computed under cannot count these files: max_seqs="):
            load(path)


def test_a_plan_predicting_under_useless_batching_names_the_option(corpus, tmp_path, capsys):
    """plan --batch-size 2**40 took 9 s and 432 MB to predict 0 steps everywhere and 0% dropped."""
    capsys.readouterr()
    argv = ["plan", "--sizes", str(corpus / "frames.npz"), "--num-shards", "2", "--partition-epoch", "2"]
    argv += ["--num-epochs", "4", "--no-plot", "--batch-size", str(2**40), "-o", str(tmp_path / "plan")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: batch_size=1099511627776 lets ") and "the largest useful batch_size is" in err, err
    assert not (tmp_path / "plan").exists()
