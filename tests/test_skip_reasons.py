"""Every skip says why and how to get what is missing: ``pytest.importorskip`` with ``reason=``, ``pytest.skip``
with a message, ``pytest.mark.skip`` and ``pytest.mark.skipif`` with ``reason=``, in every test file. No skip tells
people to pip-install the PyPI package named sisyphus (the PyPI project of that name is another one: tests/deps.py's SISYPHUS_REASON
says where the real one is), and no skip hides a failed command unless it failed for want of a network."""

import ast
import os
import re

import pytest

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


def _test_sources():
    """(path relative to tests/, text) of every test file that can skip."""
    for root, _, names in os.walk(TESTS):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if "skip" in text:  # only these can skip
                    yield os.path.relpath(path, TESTS), text


@pytest.mark.slow
def test_every_skip_in_the_tests_gives_its_reason():
    found = []
    for rel, text in _test_sources():
        found += [f"{rel}:{line}: {what}" for line, what in reasonless_skips(text)]
    assert found == [], "skips without a reason (say how to install what is missing):\n" + "\n".join(found)


#: Words of a skip reason that would install the wrong project (the PyPI package 'sisyphus' is not Sisyphus).
_WRONG_INSTALL = re.compile(r"pip install (-U )?sisyphus\b")


def wrong_install_lines(source: str):
    """(line, text) of every string in ``source`` that tells people to pip-install the PyPI package sisyphus."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _WRONG_INSTALL.search(node.value):
            out.append((node.lineno, node.value))
    return sorted(out)


def test_no_skip_tells_people_to_pip_install_the_unrelated_sisyphus():
    found = []
    for rel, text in _test_sources():
        found += [
            f"{rel}:{line}: {value!r}" for line, value in wrong_install_lines(text) if rel != "test_skip_reasons.py"
        ]
    assert found == [], "use tests/deps.py's SISYPHUS_REASON instead:\n" + "\n".join(found)


def skips_hiding_failed_commands(source: str):
    """Lines of the ``pytest.skip`` calls whose message speaks of a command's outcome (``.returncode``,
    ``.stderr``) without an ``if`` around them that asks whether the network or index was unreachable
    (a call whose name holds ``network``, ``offline``, ``unreachable`` or ``unavailable``, such as tests/deps.py's
    ``mount_unavailable``): a failed command is an error."""
    tree = ast.parse(source)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _dotted(node.func) == "pytest.skip"):
            continue
        outcome = any(isinstance(n, ast.Attribute) and n.attr in ("returncode", "stderr") for n in ast.walk(node))
        guarded, up = False, parents.get(id(node))
        while up is not None and not guarded:
            if isinstance(up, ast.If):
                names = [_dotted(c.func) for c in ast.walk(up.test) if isinstance(c, ast.Call)]
                guarded = any(
                    w in n.lower() for n in names for w in ("network", "offline", "unreachable", "unavailable")
                )
            up = parents.get(id(up))
        if outcome and not guarded:
            out.append(node.lineno)
    return out


@pytest.mark.slow
def test_no_skip_hides_a_failed_command():
    found = []
    for rel, text in _test_sources():
        found += [f"{rel}:{line}" for line in skips_hiding_failed_commands(text)]
    assert found == [], "a failed command fails the test (skip only where the network is unreachable):\n" + "\n".join(
        found
    )


def test_the_checks_find_a_wrong_install_line_and_a_skip_hiding_a_failure():
    source = (
        "import pytest\n"
        'pytest.importorskip("sisyphus", reason="needs Sisyphus: pip install ' + 'sisyphus")\n'
        "def f(proc):\n"
        "    if proc.returncode != 0:\n"
        '        pytest.skip(f"could not fetch ({proc.returncode})")\n'
        "    if proc.returncode != 0 and network_unreachable(proc.stderr):\n"
        '        pytest.skip(f"no network ({proc.stderr})")\n'
    )
    assert [line for line, _ in wrong_install_lines(source)] == [2]
    assert skips_hiding_failed_commands(source) == [5]


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
