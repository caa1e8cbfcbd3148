"""Set up the tutorial (docs/tutorial.md) in one command, from a checkout of i6_shard:

    python /path/to/i6_shard/scripts/setup_tutorial.py SETUP_DIR --i6-core PATH

into the Python that runs it (a venv, with Sisyphus installed from its repository):
- pip installs i6_shard from this checkout (with the plot extra), h5py, RETURNN, dm-tree, i6_core's requirements and
  torch pinned to the CPU build (``TORCH_PIN``), then stops with an error if the torch it finds is any other build
  (a CUDA one, or another version);
- downloads RETURNN's sdist from PyPI and unpacks it into SETUP_DIR (i6_core runs its rnn.py, the wheel has none);
- makes SETUP_DIR a Sisyphus setup: recipe/i6_core (a link to PATH), config/train.py and settings.py as the README's
  recipe writes them, settings.py also holding ``RETURNN_ROOT``, which the recipe reads (so a new shell needs no
  ``export``), and work/;
- writes the data: ``python -m i6_shard make-data -o SETUP_DIR/data``.

Only pip reaches out (PyPI, or the indexes pip is set up with). Running it again redoes what is missing.
"""

from __future__ import annotations

import argparse
import errno
import glob
import os
import re
import subprocess
import sys
import tarfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The torch the tutorial trains with: the CPU build, pinned, so that pip cannot take a CUDA build of several GB.
TORCH_VERSION = "2.13.0+cpu"
TORCH_PIN = f"torch=={TORCH_VERSION}"
#: What the manager's and RETURNN's Python need besides Sisyphus (installed from its repository) and torch.
PACKAGES = ["h5py", "returnn", "dm-tree", "librosa", "soundfile", "black", "psutil", "flask", "ipython"]


def _run(cmd: list, **kwargs) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def check_torch(python: str = sys.executable) -> str:
    """The torch ``python`` imports, if it is the pinned CPU build; else exit with what to do."""
    code = "import torch; print(torch.__version__, torch.version.cuda)"
    result = subprocess.run([python, "-c", code], capture_output=True, text=True)
    version, cuda = (result.stdout.split() + ["?", "?"])[:2] if result.returncode == 0 else ("none", "?")
    if version != TORCH_VERSION or cuda != "None":
        sys.exit(
            f"error: {python} has torch {version} (CUDA {cuda}), not the CPU build {TORCH_VERSION} the tutorial "
            f"pins: pip uninstall -y torch, then pip install '{TORCH_PIN}' from an index that has the CPU build "
            "(e.g. --index-url https://download.pytorch.org/whl/cpu), and run this again"
        )
    return version


def returnn_root(setup: str) -> str:
    """RETURNN's sdist from PyPI, unpacked in ``setup`` (once): the RETURNN root with rnn.py."""
    found = [d for d in sorted(glob.glob(os.path.join(setup, "returnn-*"))) if os.path.isfile(f"{d}/rnn.py")]
    if not found:
        sdist_dir = os.path.join(setup, "returnn_sdist")
        _run(
            [sys.executable, "-m", "pip", "download", "--no-binary", "returnn", "--no-deps", "returnn", "-d", sdist_dir]
        )
        sdists = sorted(glob.glob(os.path.join(sdist_dir, "returnn-*.tar.gz")))
        if not sdists:
            raise SetupError(f"pip download left no returnn-*.tar.gz in {sdist_dir!r}: run this again")
        with tarfile.open(sdists[-1]) as tar:
            tar.extractall(setup, filter="data")
        found = [d for d in sorted(glob.glob(os.path.join(setup, "returnn-*"))) if os.path.isfile(f"{d}/rnn.py")]
    if not found:
        sys.exit(f"error: no RETURNN root with rnn.py in {setup} after unpacking RETURNN's sdist")
    return os.path.abspath(found[-1])


def readme_blocks() -> tuple:
    """config/train.py and settings.py: the two code blocks of the README's recipe section."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme[readme.index("## Config builders") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    (config,) = [b for b in blocks if b.startswith("# config/train.py")]
    (settings,) = [b for b in blocks if b.startswith("# settings.py")]
    return config, settings


def write_setup(setup: str, *, i6_core: str, root: str) -> None:
    """The Sisyphus setup dir: recipe/i6_core, config/, work/, settings.py with RETURNN_ROOT."""
    for sub in ("recipe", "config", "work"):  # sis asks for a work dir it does not find
        os.makedirs(os.path.join(setup, sub), exist_ok=True)
    link_i6_core(os.path.join(setup, "recipe", "i6_core"), i6_core)
    config, settings = readme_blocks()
    files = {
        "config/__init__.py": "",
        "config/train.py": config,
        "settings.py": settings + f"\n\n# Written by scripts/setup_tutorial.py: the RETURNN root the recipe runs.\n"
        f"RETURNN_ROOT = {root!r}\n",
    }
    for name, text in files.items():
        with open(os.path.join(setup, name), "w", encoding="utf-8") as f:
            f.write(text)


def link_i6_core(link: str, i6_core: str) -> None:
    """``link`` a symlink to ``i6_core``: made where missing, made again where it is a link to elsewhere or to
    nothing (a half-made setup); a directory or file of the user's there is refused, naming it."""
    target = os.path.abspath(i6_core)
    if os.path.islink(link):
        if os.path.realpath(link) == os.path.realpath(target):
            return
        os.remove(link)  # a link that leads nowhere, or to another i6_core: this run's --i6-core replaces it
    elif os.path.lexists(link):
        raise SetupError(
            f"{link!r} is a {'directory' if os.path.isdir(link) else 'file'}, not the link to --i6-core "
            f"{i6_core!r} the tutorial makes there: move it away, then run this again"
        )
    os.symlink(target, link)


class SetupError(Exception):
    """What stops the setup, as one line naming the path and the fix."""


def _os_error_line(exc: OSError) -> str:
    """An OSError met while setting up, as one line naming the path and the fix."""
    path = exc.filename if exc.filename is not None else "?"
    what = (exc.strerror or str(exc)).lower()
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "make it writable (or run this as its owner)"
    elif exc.errno in (errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY):
        fix = "move it away (it is not what the tutorial writes there)"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some space"
    else:
        fix = "fix it"
    return f"{path!r}: {what}: {fix}, then run this again"


def setup_tutorial(setup_dir: str, *, i6_core: str) -> str:
    """Everything :func:`main` does; the setup's RETURNN root."""
    setup = os.path.abspath(setup_dir)
    if os.path.lexists(setup) and not os.path.isdir(setup):
        raise SetupError(f"SETUP_DIR {setup_dir!r} is a file, not a directory: give a new directory (or this one's)")
    os.makedirs(setup, exist_ok=True)
    _run([sys.executable, "-m", "pip", "install", "-e", f"{REPO}[plot]", TORCH_PIN, *PACKAGES])
    print(f"torch {check_torch()}: the CPU build", flush=True)
    root = returnn_root(setup)
    write_setup(setup, i6_core=i6_core, root=root)
    _run([sys.executable, "-m", "i6_shard", "make-data", "-o", os.path.join(setup, "data")])
    return root


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("setup_dir", help="the Sisyphus setup directory to make (or complete)")
    parser.add_argument("--i6-core", required=True, help="a clone of github.com/rwth-i6/i6_core")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.i6_core, "__init__.py")):
        sys.exit(
            f"error: --i6-core {args.i6_core!r} is no i6_core package: git clone https://github.com/rwth-i6/i6_core"
        )
    try:
        root = setup_tutorial(args.setup_dir, i6_core=args.i6_core)
    except SetupError as exc:
        return _error(str(exc))
    except subprocess.CalledProcessError as exc:
        cmd = " ".join(map(str, exc.cmd))
        return _error(
            f"`{cmd}` failed with exit status {exc.returncode} (its output is above): fix what it says, then run this again"
        )
    except (OSError, tarfile.TarError) as exc:
        line = (
            _os_error_line(exc)
            if isinstance(exc, OSError)
            else f"RETURNN's sdist cannot be unpacked ({exc}): delete {os.path.join(args.setup_dir, 'returnn_sdist')!r}, then run this again"
        )
        return _error(f"cannot set up {args.setup_dir!r}: {line}")
    setup = os.path.abspath(args.setup_dir)
    print(f"\nset up {setup} (RETURNN_ROOT={root}, in its settings.py); next: cd {setup} && sis m -r config/train.py")
    return 0


def _error(line: str) -> int:
    print(f"error: {' '.join(line.split())}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
