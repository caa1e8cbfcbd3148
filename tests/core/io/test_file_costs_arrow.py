"""Costs of HuggingFace/arrow shards: rows from the record batches' metadata and frames from a named length
column, for Arrow IPC streams (as HuggingFace datasets writes ``data-00000-of-00001.arrow``) and IPC files."""

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="arrow shards need pyarrow: pip install pyarrow (or i6_shard[arrow])")

from i6_shard import core  # noqa: E402
from i6_shard.cli import main  # noqa: E402
from i6_shard.core.io.file_costs import collect_file_costs, load_file_costs, read_arrow_seq_lengths  # noqa: E402
from i6_shard.core.pure.batching import Batching, file_millisteps  # noqa: E402


def _write_shard(path, lengths, *, stream=True, batch_rows=7):
    """An arrow shard of len(lengths) rows: a list<float> feature column of those lengths, their int copy and
    a text column, in record batches of ``batch_rows`` rows."""
    schema = pa.schema([("input_values", pa.list_(pa.float32())), ("num_frames", pa.int32()), ("text", pa.string())])
    open_writer = pa.ipc.new_stream if stream else pa.ipc.new_file
    with pa.OSFile(str(path), "wb") as sink, open_writer(sink, schema) as writer:
        for start in range(0, len(lengths), batch_rows):
            part = lengths[start : start + batch_rows]
            writer.write_batch(
                pa.record_batch(
                    [
                        pa.array([[0.5] * n for n in part], type=pa.list_(pa.float32())),
                        pa.array(part, type=pa.int32()),
                        pa.array([f"utt {i}" for i in range(len(part))]),
                    ],
                    schema=schema,
                )
            )
    return str(path)


@pytest.fixture
def shards(tmp_path):
    rng = np.random.RandomState(3)
    out = []
    for i in range(6):
        lengths = [int(x) for x in rng.randint(1, 90, size=int(rng.randint(0, 40)))]
        d = tmp_path / f"shard{i}"
        d.mkdir()
        out.append((_write_shard(d / "data-00000-of-00001.arrow", lengths, stream=i % 2 == 0), lengths))
    return out


def test_rows_and_length_columns_of_streams_and_files(shards):
    for path, lengths in shards:
        assert read_arrow_seq_lengths(path) == len(lengths)
        for column in ("input_values", "num_frames"):
            assert read_arrow_seq_lengths(path, length_column=column).tolist() == lengths


def test_units_of_an_arrow_file_list(shards):
    paths = [p for p, _ in shards]
    seqs = collect_file_costs(paths, unit="seqs", num_procs=1)
    assert seqs.costs.tolist() == [len(x) for _, x in shards] and seqs.num_frames.tolist() == [0] * len(shards)
    frames = collect_file_costs(paths, unit="frames", length_column="input_values", num_procs=1)
    assert frames.costs.tolist() == [sum(x) for _, x in shards]
    assert frames.num_seqs.tolist() == [len(x) for _, x in shards]
    batching = Batching(batch_size=400, max_seqs=8)
    steps = collect_file_costs(paths, unit="steps", length_column="num_frames", batching=batching, num_procs=1)
    assert steps.costs.tolist() == file_millisteps([np.array(x) for _, x in shards], batching).tolist()
    with pytest.raises(ValueError, match="name its length column"):
        collect_file_costs(paths, unit="frames", num_procs=1)
    with pytest.raises(ValueError, match="no loss can be predicted"):
        core.io.file_costs.prediction_batching(seqs, batching)


def test_bad_length_columns_and_files(tmp_path, shards):
    path = shards[0][0]
    with pytest.raises(ValueError, match=r"no column 'frames'; its columns are \['input_values'"):
        read_arrow_seq_lengths(path, length_column="frames")
    with pytest.raises(ValueError, match="column 'text' is string"):
        read_arrow_seq_lengths(path, length_column="text")
    nulls = str(tmp_path / "nulls.arrow")
    with pa.OSFile(nulls, "wb") as sink, pa.ipc.new_stream(sink, pa.schema([("n", pa.int64())])) as writer:
        writer.write_batch(pa.record_batch([pa.array([3, None])], names=["n"]))
    assert read_arrow_seq_lengths(nulls) == 2
    with pytest.raises(ValueError, match="1 nulls"):
        read_arrow_seq_lengths(nulls, length_column="n")
    junk = tmp_path / "junk.arrow"
    junk.write_bytes(b"not arrow at all")
    with pytest.raises(ValueError, match="is not an Arrow IPC stream or file"):
        read_arrow_seq_lengths(str(junk))


def test_cli_costs_of_arrow_shards_then_plan(tmp_path, shards, capsys):
    list_path = str(tmp_path / "files.txt")
    core.write_file_list([p for p, _ in shards], list_path)
    out = str(tmp_path / "costs.npz")
    assert main(["costs", list_path, "--unit", "frames", "--length-column", "input_values", "-o", out]) == 0
    assert load_file_costs(out).costs.tolist() == [sum(x) for _, x in shards]
    assert (
        main(
            [
                "plan",
                "--sizes",
                out,
                "--num-shards",
                "2",
                "--partition-epoch",
                "1",
                "--num-epochs",
                "2",
                "--distribution",
                "balanced",
                "--batch-size",
                "300",
                "--no-plot",
                "-o",
                str(tmp_path / "plan"),
            ]
        )
        == 0
    )
    assert "unit                 frames" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [0, 1])
def test_rows_and_frames_equal_returnn_huggingface_dataset(tmp_path, seed):
    """Shards written by HuggingFace ``save_to_disk``: per shard, the rows and the length column's values equal
    the sequences and their lengths as RETURNN's HuggingFaceDataset delivers them."""
    datasets = pytest.importorskip("datasets", reason="HuggingFace datasets writes the shards: pip install datasets")
    hf = pytest.importorskip("returnn.datasets.huggingface", reason="needs RETURNN: pip install returnn")
    rng = np.random.RandomState(seed)
    num = int(rng.randint(5, 40))
    lens = [int(x) for x in rng.randint(1, 60, size=num)]
    data = datasets.Dataset.from_dict(
        {"id": [f"seq-{i}" for i in range(num)], "feat": [[0.5] * n for n in lens], "num_frames": lens}
    )
    data.save_to_disk(str(tmp_path / "hf"), num_shards=int(rng.randint(1, 4)))
    files = hf.get_arrow_shard_files_from_hf_dataset_dir(str(tmp_path / "hf"))
    costs = collect_file_costs(files, unit="frames", length_column="feat", num_procs=1)
    for i, path in enumerate(files):
        dataset = hf.HuggingFaceDataset(
            dataset_opts=[path], data_format={"feat": {"dtype": "float64", "shape": [None]}}
        )
        dataset.initialize()
        dataset.init_seq_order(epoch=1)
        lengths = []
        while dataset.is_less_than_num_seqs(len(lengths)):
            dataset.load_seqs(len(lengths), len(lengths) + 1)
            lengths.append(int(dataset.get_data(len(lengths), "feat").shape[0]))
        assert read_arrow_seq_lengths(path) == dataset.num_seqs == len(lengths)
        assert read_arrow_seq_lengths(path, length_column="feat").tolist() == lengths
        assert read_arrow_seq_lengths(path, length_column="num_frames").tolist() == lengths
        assert int(costs.costs[i]) == sum(lengths) and int(costs.num_seqs[i]) == len(lengths)
    assert sum(int(c) for c in costs.num_seqs) == num
