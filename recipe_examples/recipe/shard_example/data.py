"""TinyHdfDataJob: a few small HDF files of random features with skewed sizes, written with
RETURNN's own SimpleHDFWriter, standing in for a real corpus in the example."""

import os

import numpy as np
from sisyphus import Job, Task


class TinyHdfDataJob(Job):
    """``num_files`` HDF files with 1..``max_seqs`` sequences of random length each (tags
    ``corpus/file{i}/seq{j}``), and the list of them.

    Outputs: out_dir (the HDF files), out_file_list (``files.txt``, one path a line).
    """

    def __init__(self, *, num_files: int, max_seqs: int = 12, feature_dim: int = 8, seed: int = 0):
        self.num_files = num_files
        self.max_seqs = max_seqs
        self.feature_dim = feature_dim
        self.seed = seed
        self.out_dir = self.output_path("hdf", directory=True)
        self.out_file_list = self.output_path("files.txt")

    def tasks(self):
        yield Task("run", mini_task=True)

    def run(self):
        from returnn.datasets.hdf import SimpleHDFWriter

        rng = np.random.RandomState(self.seed)
        paths = []
        for i in range(self.num_files):
            path = os.path.join(self.out_dir.get_path(), f"part-{i:03d}.hdf")
            # Written under a temporary name next to `path`, renamed to `path` once complete: a killed
            # run leaves no part file that could pass for a finished one, whatever the writer does.
            tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.incomplete")
            try:
                if os.path.exists(tmp):  # SimpleHDFWriter creates the file itself and refuses to overwrite one
                    os.unlink(tmp)
                writer = SimpleHDFWriter(tmp, dim=self.feature_dim, ndim=2)
                for j in range(int(rng.randint(1, self.max_seqs + 1))):
                    n = int(rng.randint(5, 200))
                    feats = rng.rand(1, n, self.feature_dim).astype("float32")
                    writer.insert_batch(feats, seq_len=[n], seq_tag=[f"corpus/file{i}/seq{j}"])
                writer.close()
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            paths.append(path)
        with open(self.out_file_list.get_path(), "w", encoding="utf-8") as f:
            f.write("".join(p + "\n" for p in paths))
