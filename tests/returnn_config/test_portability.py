"""The tests name no directory of a particular machine: an external checkout they need comes from
an environment variable, and the test skips, saying which, when it is not set."""

import ast
import glob
import os

import pytest

TEST_FILES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "*.py")))
_PATH_CHECKS = {"isdir", "isfile", "exists", "lexists"}


def _machine_paths(tree: ast.Module):
    """Absolute paths the module holds as constants or checks for on disk, with their lines."""

    def absolute(node):
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("/")

    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and absolute(node.value):
            yield node.lineno, node.value.value
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _PATH_CHECKS
            and node.args
            and absolute(node.args[0])
        ):
            yield node.lineno, node.args[0].value


@pytest.mark.parametrize("path", TEST_FILES, ids=os.path.basename)
def test_no_machine_specific_paths(path):
    with open(path, encoding="utf-8") as f:
        found = list(_machine_paths(ast.parse(f.read(), path)))
    assert not found, (
        f"{os.path.basename(path)} names directories of one machine {found}; take them from an "
        "environment variable and skip with its name when it is unset"
    )


def test_the_check_finds_both_forms():
    code = 'ROOT = "/data/x"\ndef f():\n    return os.path.isdir("/opt/y")\n'
    assert list(_machine_paths(ast.parse(code))) == [(1, "/data/x"), (3, "/opt/y")]
