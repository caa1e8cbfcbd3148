"""Helpers shared by the Sisyphus jobs: turn Sisyphus paths into plain strings, reject relative
path strings, write tk.Variable values atomically, and find the import roots a subprocess needs."""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import types
from typing import Any, Dict, List, Optional, Union

from sisyphus import Task
from sisyphus.delayed_ops import DelayedBase
from sisyphus.job_path import AbstractPath, Variable

from i6_shard import core

__all__ = ["instantiate", "check_absolute", "check_absolute_leaves", "write_variable", "import_roots",
           "pythonpath_env", "path_str", "rqmt_from_args", "task_for"]

#: Relative names listed in an error message.
_MAX_LISTED = 3
_RELATIVE_HINT = ("Sisyphus runs a job's tasks with the job's work dir as the current dir, so it would be looked up "
                  "there; give an absolute path or a tk.Path (Sisyphus resolves a relative tk.Path against the "
                  "setup dir)")


def instantiate(obj: Any) -> Any:
    """A copy of ``obj`` with every Sisyphus path replaced by its absolute path string and every
    other delayed value by its value, inside dicts, lists, tuples and ``functools.partial``."""
    if isinstance(obj, AbstractPath) and not isinstance(obj, Variable):
        return obj.get_path()
    if isinstance(obj, DelayedBase):
        return instantiate(obj.get())
    if isinstance(obj, dict):
        return {k: instantiate(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [instantiate(v) for v in obj]
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(instantiate(v) for v in obj)
    if isinstance(obj, functools.partial):
        return functools.partial(instantiate(obj.func), *instantiate(list(obj.args)), **instantiate(obj.keywords))
    return obj


def check_absolute(path: Any, *, name: str) -> None:
    """Reject a relative path given as a str; a tk.Path (relative or not) is fine."""
    if isinstance(path, str) and not os.path.isabs(path):
        raise ValueError(f"{name}={path!r} is a relative path. {_RELATIVE_HINT}.")


def check_absolute_leaves(trees: List[Any], *, name: str) -> None:
    """Reject file trees with relative str leaves, listing how many and the first few."""
    relative = [leaf for tree in trees for leaf in core.pure.flatten(tree)
                if isinstance(leaf, str) and not os.path.isabs(leaf)]
    if relative:
        raise ValueError(f"{name} holds {len(relative)} relative file names (first "
                         f"{min(len(relative), _MAX_LISTED)}: {relative[:_MAX_LISTED]}). {_RELATIVE_HINT}.")


def write_variable(var: Variable, value: Any) -> None:
    """Set a (non-pickled) tk.Variable atomically, in the format ``Variable.get`` reads back."""
    with core.io.atomic_write(var.get_path(), "wt", encoding="utf-8") as f:
        f.write("%s\n" % repr(value))


def _module_root(module_name: str) -> Optional[str]:
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    root = os.path.dirname(os.path.abspath(path))
    depth = module_name.count(".") + (1 if os.path.basename(path).startswith("__init__.") else 0)
    for _ in range(depth):
        root = os.path.dirname(root)
    return root


def import_roots(obj: Any) -> List[str]:
    """Directories from which the functions and classes inside ``obj`` (and i6_shard itself) were
    imported, so that a subprocess can unpickle ``obj``. The standard library and installed
    packages (site-packages) are left out: another Python must have its own."""
    found = {}

    def visit(o: Any) -> None:
        if isinstance(o, dict):
            for v in o.values():
                visit(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                visit(v)
        elif isinstance(o, functools.partial):
            visit(o.func)
            visit(o.args)
            visit(o.keywords)
        elif isinstance(o, (types.FunctionType, type)):
            found.setdefault(o.__module__, None)

    visit(obj)
    installed = {os.path.realpath(p) for k, p in sysconfig.get_paths().items()
                 if k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots = []
    for name in ["i6_shard"] + sorted(found):
        root = _module_root(name)
        if not root or root in roots or os.path.realpath(root) in installed \
                or os.path.basename(root) in ("site-packages", "dist-packages"):
            continue
        roots.append(root)
    return roots


def pythonpath_env(extra: List[str]) -> dict:
    """The current environment with ``extra`` directories in front of ``PYTHONPATH``."""
    env = dict(os.environ)
    old = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(list(dict.fromkeys(extra + old)))
    return env


def path_str(path: Any) -> Any:
    """A tk.Path as its path string; anything else (str, None) unchanged."""
    return path.get_path() if isinstance(path, AbstractPath) else path


def rqmt_from_args(*, time_rqmt: Optional[float] = None, mem_rqmt: Optional[float] = None,
                   cpu_rqmt: Optional[int] = None, default: Optional[Dict[str, Union[int, float]]] = None
                   ) -> Optional[Dict[str, Union[int, float]]]:
    """A task's resource request from i6_core-style arguments (hours, GB, CPUs), over ``default``;
    None (a mini task) when neither any argument nor a default is given.

    :raises TypeError, ValueError: for a value that is not a positive number
    """
    given = {}
    for key, name, value in (("time", "time_rqmt", time_rqmt), ("mem", "mem_rqmt", mem_rqmt),
                             ("cpu", "cpu_rqmt", cpu_rqmt)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise (ValueError if isinstance(value, (int, float)) and not isinstance(value, bool) else TypeError)(
                f"{name}={value!r} must be a positive number ({'hours' if key == 'time' else 'GB' if key == 'mem' else 'CPUs'})")
        given[key] = int(value) if key == "cpu" else value
    if not given and default is None:
        return None
    return {**(default or {}), **given}


def task_for(name: str, rqmt: Optional[Dict[str, Union[int, float]]], **kwargs) -> Task:
    """A Task that runs as a mini task without a resource request, else with it."""
    if rqmt is None:
        return Task(name, mini_task=True, **kwargs)
    return Task(name, rqmt=dict(rqmt), **kwargs)
