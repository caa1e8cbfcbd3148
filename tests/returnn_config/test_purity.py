"""Building a plain dataset dict and its config code needs neither Sisyphus, i6_core nor RETURNN."""

import subprocess
import sys


def test_builders_import_no_framework():
    code = (
        "import sys\n"
        "from i6_shard.returnn_config import sharded_files_dataset, config_code\n"
        "d = sharded_files_dataset(['a.hdf', 'b.hdf'], sub_epoch_dataset={'class': 'HDFDataset', "
        "'seq_ordering': 'random'}, partition_epoch=2, num_shards=1)\n"
        "config_code({'train': d})\n"
        "print(','.join(m for m in ('sisyphus', 'i6_core', 'returnn', 'tree') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"building a plain dataset dict imported {out}"
