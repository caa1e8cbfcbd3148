"""docs/architecture.md names every module of the package, so that it cannot silently drift from the code."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_module_is_in_the_architecture_page():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        doc = f.read()
    missing = []
    for folder, _, names in os.walk(os.path.join(ROOT, "i6_shard")):
        for name in names:
            if name.endswith(".py") and name != "__init__.py" and f"`{name}`" not in doc:
                missing.append(os.path.relpath(os.path.join(folder, name), ROOT))
    assert not missing, f"docs/architecture.md does not describe {sorted(missing)}"
