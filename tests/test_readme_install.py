"""The README tells a newcomer what the tests need: torch for the training tests, with the exact CPU install line
that the skip reason names too; and its times say from what to what."""

import os
import re

from tests.deps import TORCH_INSTALL

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme() -> str:
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        return f.read()


def _quick_start() -> str:
    text = _readme()
    start = text.index("## Quick start")
    return " ".join(text[start : text.index("\n## ", start + 3)].split())


def test_the_readme_names_torch_for_the_training_tests_and_the_skip():
    quick = _quick_start()
    assert "The training tests (`tests/training`" in quick and "also need torch, the CPU build" in quick
    line = TORCH_INSTALL.split(" (")[0]
    assert line == "pip install torch==2.13.0" and f"`{line}`" in quick
    assert "pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu" in quick
    assert "Without torch they are skipped, the reason naming that line" in quick


def test_no_time_in_the_readme_or_tutorial_stands_without_its_start_and_end():
    for name in ("README.md", os.path.join("docs", "tutorial.md")):
        with open(os.path.join(REPO, name), encoding="utf-8") as f:
            text = " ".join(f.read().split())
        assert "from nothing in about" not in text, name  # the training alone was meant
        assert not re.search(r"\bTIME_(SETUP|SIS)\b", text), name  # no placeholder left
    assert "from `sis m -r` to the training report in about" in " ".join(_readme().split())
