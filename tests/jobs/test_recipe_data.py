"""The example's TinyHdfDataJob: HDF files RETURNN reads, each appearing only once complete."""

import os

import pytest

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("returnn.datasets.hdf", reason="needs RETURNN: pip install returnn")

RECIPE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "recipe_examples", "recipe"
)


@pytest.fixture
def tiny_hdf_data_job(monkeypatch):
    monkeypatch.syspath_prepend(RECIPE)
    from shard_example import TinyHdfDataJob

    return TinyHdfDataJob


def test_writes_files_returnn_reads(work_dir, tiny_hdf_data_job):
    from returnn.datasets.hdf import HDFDataset

    job = tiny_hdf_data_job(num_files=2, max_seqs=3, seed=4)
    run_job(job)
    with open(job.out_file_list.get_path()) as f:
        paths = f.read().split()
    assert paths == [os.path.join(job.out_dir.get_path(), f"part-{i:03d}.hdf") for i in range(2)]
    assert sorted(os.listdir(job.out_dir.get_path())) == ["part-000.hdf", "part-001.hdf"]
    dataset = HDFDataset(files=paths)
    dataset.init_seq_order(epoch=1)
    assert dataset.get_all_tags()[0] == "corpus/file0/seq0"
    run_job(job)  # a rerun overwrites its outputs
    assert sorted(os.listdir(job.out_dir.get_path())) == ["part-000.hdf", "part-001.hdf"]


def test_a_writer_dying_in_close_leaves_no_part_file(work_dir, tiny_hdf_data_job, monkeypatch):
    """Even a writer that writes the destination in place (and dies doing it) leaves no file
    that could pass for a finished part."""
    from returnn.datasets.hdf import SimpleHDFWriter

    def close_in_place_and_die(self):
        self._file.close()
        with open(self.tmp_filename, "rb") as src, open(self.filename, "wb") as dst:
            dst.write(src.read(100))
        os.remove(self.tmp_filename)
        raise KeyboardInterrupt("killed while copying")

    monkeypatch.setattr(SimpleHDFWriter, "close", close_in_place_and_die)
    job = tiny_hdf_data_job(num_files=2, max_seqs=3, seed=5)
    with pytest.raises(KeyboardInterrupt):
        run_job(job)
    assert [n for n in os.listdir(job.out_dir.get_path()) if n.endswith(".hdf")] == []
