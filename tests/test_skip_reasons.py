"""Every skip says why and how to get what is missing: ``pytest.importorskip`` with ``reason=``, ``pytest.skip``
with a message, ``pytest.mark.skip`` and ``pytest.mark.skipif`` with ``reason=``, in every test file."""

import ast
import os

TESTS = os.path.dirname(os.path.abspath(__file__))


def _dotted(node) -> str:
    """``pytest.mark.skipif`` for that attribute chain, '' for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id] + parts[::-1]) if isinstance(node, ast.Name) else ""


def reasonless_skips(source: str):
    """(line, what) of every skip in ``source`` that gives no reason."""
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name, keywords, args = _dotted(node.func), {k.arg for k in node.keywords}, node.args
        elif isinstance(node, ast.Attribute) and id(node) not in called:
            name, keywords, args = _dotted(node), set(), []  # a bare decorator: @pytest.mark.skip
        else:
            continue
        if name in ("pytest.importorskip", "pytest.mark.skip", "pytest.mark.skipif") and "reason" not in keywords:
            out.append((node.lineno, name))
        elif name == "pytest.skip" and not args and not keywords & {"reason", "msg"}:
            out.append((node.lineno, name))
    return sorted(out)


def test_every_skip_in_the_tests_gives_its_reason():
    found = []
    for root, _, names in os.walk(TESTS):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if "skip" in text:  # only these can skip
                    rel = os.path.relpath(path, TESTS)
                    found += [f"{rel}:{line}: {what}" for line, what in reasonless_skips(text)]
    assert found == [], "skips without a reason (say how to install what is missing):\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_reasonless_skip():
    source = (
        "import pytest\n"
        'h5py = pytest.importorskip("h5py")\n'
        'ok = pytest.importorskip("h5py", reason="pip install h5py")\n'
        "pytest.skip()\n"
        'pytest.skip("no GPU here")\n'
        "@pytest.mark.skipif(True)\n"
        "def test_a(): pass\n"
        '@pytest.mark.skipif(True, reason="why")\n'
        "def test_b(): pass\n"
        "@pytest.mark.skip\n"
        "def test_c(): pass\n"
        '@pytest.mark.skip(reason="why")\n'
        "def test_d(): pass\n"
    )
    assert reasonless_skips(source) == [
        (2, "pytest.importorskip"),
        (4, "pytest.skip"),
        (6, "pytest.mark.skipif"),
        (10, "pytest.mark.skip"),
    ]
