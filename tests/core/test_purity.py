"""The core stays pure: importing it pulls in neither Sisyphus, RETURNN nor i6_core."""

import subprocess
import sys


def test_core_imports_no_framework():
    code = (
        "import sys, i6_shard.core\n"
        "bad = [m for m in ('sisyphus', 'returnn', 'i6_core', 'tree') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"i6_shard.core imported {out}"
