"""Functions stay short after formatting: at most :data:`MAX_LONG_FUNCTIONS` functions of i6_shard have more than
:data:`MAX_LINES` lines of code, counted from the syntax tree: the lines a function spans, without blank lines,
comment lines and docstrings (its own and those of functions and classes inside it)."""

import ast
import io
import os
import tokenize

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 60
MAX_LONG_FUNCTIONS = 5


def _docstring_lines(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.update(range(first.lineno, first.end_lineno + 1))
    return out


def _code_lines(source):
    """Line numbers that hold a token other than a comment or a line break."""
    out = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            out.update(range(tok.start[0], tok.end[0] + 1))
    return out


def function_lengths(source):
    """``[(qualified name, lines of code)]`` of every function in ``source``, nested ones too."""
    tree = ast.parse(source)
    code = _code_lines(source) - _docstring_lines(tree)
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.append((prefix + child.name, len([n for n in code if start <= n <= child.end_lineno])))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def long_functions():
    out = []
    for folder, _, names in os.walk(os.path.join(ROOT, "i6_shard")):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    lengths = function_lengths(f.read())
                rel = os.path.relpath(path, ROOT)
                out += [(n, f"{rel} {q}") for q, n in lengths if n > MAX_LINES]
    return sorted(out, reverse=True)


def test_the_count_leaves_out_docstrings_comments_and_blank_lines():
    source = 'def f(x):\n    """Doc\n    string."""\n\n    # a comment\n    y = (x +\n         1)\n    return y\n'
    assert function_lengths(source) == [("f", 4)]  # def, the two lines of y, return


@pytest.mark.slow
def test_at_most_a_few_long_functions():
    found = long_functions()
    shown = "\n".join(f"  {n} lines: {where}" for n, where in found)
    assert len(found) <= MAX_LONG_FUNCTIONS, (
        f"{len(found)} functions have more than {MAX_LINES} lines of code (at most {MAX_LONG_FUNCTIONS} may):\n{shown}"
    )
