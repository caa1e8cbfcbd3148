"""docs/architecture.md names every module of the package by its path, so that it cannot silently drift from the
code, and names no module that is not there."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "i6_shard")
#: The folders of the package, as the page writes module paths (relative to ``i6_shard/``).
FOLDERS = ("core/", "jobs/", "returnn_config/", "returnn_ext/")


def _doc():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        return f.read()


def _module_paths():
    out = []
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py") and name != "__init__.py":
                out.append(os.path.relpath(os.path.join(folder, name), PACKAGE).replace(os.sep, "/"))
    return sorted(out)


def test_every_module_is_in_the_architecture_page_by_its_path():
    doc = _doc()
    missing = [path for path in _module_paths() if f"`{path}`" not in doc]
    assert not missing, f"docs/architecture.md does not describe {missing} (name each by its path in i6_shard/)"


def test_the_page_names_no_module_that_is_not_there():
    named = set(re.findall(r"`((?:%s)[\w/]*\.py)`" % "|".join(map(re.escape, FOLDERS)), _doc()))
    gone = sorted(p for p in named if not os.path.isfile(os.path.join(PACKAGE, p)))
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"
