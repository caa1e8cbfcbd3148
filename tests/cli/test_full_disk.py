"""Commands that write data (``make-data``, ``sizes``, ``costs``, ``plan``) on a full device (ENOSPC, EDQUOT): one line
naming the output and the space it needs, exit status 2, nothing partial left and an earlier output kept. On a real
small tmpfs (mounted in a private mount namespace) and with the write failing with EDQUOT."""

import errno
import json
import os
import shutil
import sys
import textwrap

import pytest

from tests.deps import mount_unavailable

from tests.blocking import run_to_end

from i6_shard.cli import main
from tests.cli.conftest import plan_argv

pytest.importorskip("h5py", reason="make-data writes HDF files: pip install h5py")

#: Runs inside the namespace: fills the tmpfs at argv[1] but for 2 KiB, runs each command, reports what it saw.
_RUN = """
import json, os, subprocess, sys
mnt, inputs = sys.argv[1], sys.argv[2]
lst, sizes = os.path.join(inputs, "data", "files.txt"), os.path.join(inputs, "sizes.npz")
def run(*argv):
    p = subprocess.run([sys.executable, "-m", "i6_shard", *argv], capture_output=True, text=True)
    return {"rc": p.returncode, "err": p.stderr, "beside": sorted(os.listdir(mnt))}
out = {"earlier_plan": run("plan", "--sizes", sizes, "--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4",
                           "--no-plot", "-o", os.path.join(mnt, "plan"))}
earlier = {n: open(os.path.join(mnt, "plan", n), "rb").read() for n in sorted(os.listdir(os.path.join(mnt, "plan")))}
st = os.statvfs(mnt)
with open(os.path.join(mnt, "filler"), "wb") as f:
    f.write(b"x" * (st.f_bavail * st.f_frsize - 2048))
out["make-data"] = run("make-data", "-o", os.path.join(mnt, "data"), "--num-files", "4")
out["sizes"] = run("sizes", lst, "-o", os.path.join(mnt, "sizes.npz"))
out["costs"] = run("costs", lst, "-o", os.path.join(mnt, "costs.npz"))
out["plan"] = run("plan", "--sizes", sizes, "--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "400",
                  "--no-plot", "-o", os.path.join(mnt, "plan"))
now = {n: open(os.path.join(mnt, "plan", n), "rb").read() for n in sorted(os.listdir(os.path.join(mnt, "plan")))}
out["plan_kept"] = now == earlier
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("full_disk_inputs")
    assert main(["make-data", "-o", str(d / "data"), "--num-files", "8"]) == 0
    assert main(["sizes", str(d / "data" / "files.txt"), "-o", str(d / "sizes.npz")]) == 0
    return d


@pytest.mark.slow
def test_on_a_full_tmpfs_each_command_is_one_line_naming_output_and_space(tmp_path, inputs):
    """make-data gave an h5py RuntimeError traceback (rc 1); the others named no space needed."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux) to mount a small tmpfs in a private mount namespace")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = ['mount -t tmpfs -o size=200k tmpfs "$1" && shift && exec "$@"', "sh", str(mnt)]
    res = run_to_end(
        [unshare, "-rm", "sh", "-c", *script, sys.executable, "-c", textwrap.dedent(_RUN), str(mnt), str(inputs)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    if res.returncode != 0 and mount_unavailable(res.stderr):
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()[-200:]}")
    assert res.returncode == 0, res.stderr[-3000:]
    seen = json.loads(res.stdout)
    assert seen["earlier_plan"]["rc"] == 0, seen["earlier_plan"]
    # plan names the file it could not write (its first, plan.npz), not the directory
    outputs = {
        "make-data": "data",
        "sizes": "sizes.npz",
        "costs": "costs.npz",
        "plan": os.path.join("plan", "plan.npz"),
    }
    for command, name in outputs.items():
        r = seen[command]
        err = r["err"]
        assert r["rc"] == 2, (command, err[-2000:])
        if command == "make-data":  # the file it could not write, in the data directory
            shown = err.split("'")[1]
            assert shown.startswith(os.path.join(str(mnt), "data", "")) and shown.endswith((".hdf", ".txt")), err
            name = os.path.relpath(shown, str(mnt))
        assert err.startswith(
            f"error: cannot write {os.path.join(str(mnt), name)!r}: no space left on device; it needs about "
        ), (command, err)
        assert err.count("\n") == 1 and "Traceback" not in err and "free there" in err, (command, err)
        if command == "plan":  # what its 8 files' set needs (its rendered bytes), not a blanket 4 MiB
            assert "it needs about " in err and " KiB, " in err.split("it needs about ")[1][:20], err
        assert r["beside"] == ["filler", "plan"], (command, r["beside"])  # nothing partial, the earlier plan kept
    assert seen["plan_kept"]


def _quota_exceeded(*args, **kwargs):
    raise OSError(errno.EDQUOT, "Disk quota exceeded")


@pytest.mark.parametrize("command", ["make-data", "sizes", "costs", "plan"])
def test_a_quota_exceeded_write_is_one_line_naming_output_and_space(tmp_path, inputs, capsys, monkeypatch, command):
    import i6_shard.core.io.atomic as atomic

    real_replace = os.replace
    monkeypatch.setattr(atomic.os, "replace", lambda *a, **k: _quota_exceeded() if a else real_replace(*a, **k))
    out = str(tmp_path / {"make-data": "data", "sizes": "s.npz", "costs": "c.npz", "plan": "plan"}[command])
    lst = str(inputs / "data" / "files.txt")
    argv = {
        "make-data": ["make-data", "--num-files", "3", "-o", out],
        "sizes": ["sizes", lst, "-o", out],
        "costs": ["costs", lst, "-o", out],
        "plan": plan_argv(inputs / "sizes.npz", out, "--num-epochs", "4", "--no-plot"),
    }[command]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    # plan and make-data: the file they could not write
    shown = {"plan": os.path.join(out, "plan.npz"), "make-data": os.path.join(out, "data", "part-0.hdf")}.get(
        command, out
    )
    assert err.startswith(f"error: cannot write {shown!r}: disk quota exceeded; it needs about "), err
    assert err.count("\n") == 1 and "free there" in err, err
    assert os.listdir(tmp_path) == []
