"""Helpers shared by the Sisyphus jobs: turn Sisyphus paths into plain strings, reject relative
path strings, write tk.Variable values atomically, find the import roots a subprocess needs, and
take resource requests and RETURNN's Python and root the way i6_core's jobs do."""

from __future__ import annotations

import functools
import math
import numbers
import os
import shutil
import sys
import sysconfig
import types
from typing import Any, Dict, List, Optional, Union

import numpy as np
from sisyphus import Job, Task, gs, tk
from sisyphus.delayed_ops import DelayedBase
from sisyphus.job_path import AbstractPath, Variable

from i6_shard import core
from i6_shard.returnn_config.pycode import KEEP, resolve_paths

#: Relative names listed in an error message.
_MAX_LISTED = 3
_RELATIVE_HINT = (
    "Sisyphus runs a job's tasks with the job's work dir as the current dir, so it would be looked up "
    "there; give an absolute path or a tk.Path (Sisyphus resolves a relative tk.Path against the "
    "setup dir)"
)


def _delayed_leaf(obj: Any) -> Any:
    if isinstance(obj, AbstractPath) and not isinstance(obj, Variable):
        return obj.get_path()
    if isinstance(obj, DelayedBase):  # a tk.Variable's value, a delayed op's result
        return instantiate(obj.get())
    return KEEP


def instantiate(obj: Any) -> Any:
    """A copy of ``obj`` with every Sisyphus path replaced by its absolute path string and every
    other delayed value by its value, inside dicts, lists, tuples and ``functools.partial``: the config
    layer's one walker (:func:`~i6_shard.returnn_config.pycode.resolve_paths`) with this rule for a value."""
    return resolve_paths(obj, leaf=_delayed_leaf)


def check_picklable_functions(obj: Any, *, where: str) -> None:
    """Functions in the dataset dict must be importable by name: the RETURNN processes unpickle
    them, and Sisyphus hashes them by module and name. ``where`` names ``obj`` in the error."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_picklable_functions(v, where=f"{where}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            check_picklable_functions(v, where=f"{where}[{i}]")
    elif isinstance(obj, functools.partial):
        check_picklable_functions(obj.func, where=f"{where}.func")
        check_picklable_functions(list(obj.args) + list(obj.keywords.values()), where=f"{where}.args")
    elif isinstance(obj, types.FunctionType):
        if "<" in obj.__qualname__ or obj.__module__ == "__main__":
            raise ValueError(
                f"{where} is {obj.__module__}.{obj.__qualname__}, which cannot be pickled for the RETURNN "
                "processes nor hashed stably; use a module-level function (bind arguments with functools.partial)"
            )


def plain_numbers(obj: Any) -> Any:
    """``obj`` with numpy integers, bools and floats other than ``np.float64`` (a ``float`` already)
    turned into Python ones, inside dicts, lists, tuples and
    ``functools.partial`` too; ``obj`` itself (not a copy) when it holds none, and containers of
    other types are left alone, so that whatever hashed before hashes the same.

    >>> plain_numbers({"n": np.int64(4), "f": [np.bool_(True), 1.5]})
    {'n': 4, 'f': [True, 1.5]}
    """
    if isinstance(obj, (np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, np.floating) and not isinstance(obj, float):  # np.float64 is a float and hashes as before
        return float(obj)
    if type(obj) is dict:
        items = {k: plain_numbers(v) for k, v in obj.items()}
        return obj if all(items[k] is v for k, v in obj.items()) else items
    if type(obj) in (list, tuple):
        items = [plain_numbers(v) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else type(obj)(items)
    if type(obj) is functools.partial:
        args, keywords = plain_numbers(obj.args), plain_numbers(obj.keywords)
        return obj if args is obj.args and keywords is obj.keywords else functools.partial(obj.func, *args, **keywords)
    return obj


#: The deepest nesting of dicts and lists a job argument may have: Sisyphus' hash and :func:`plain_numbers` walk
#: arguments recursively (a RecursionError deeper).
MAX_ARGUMENT_DEPTH = 100


class PlainNumbersJobType(type(Job)):
    """The metaclass of i6_shard's jobs: Sisyphus' own (one job object per id), after turning numpy
    integers and bools in the arguments into Python ones (:func:`plain_numbers`). Sisyphus walks the
    arguments for paths right after hashing them and fails on a numpy scalar ("Failed to get object
    state"), before a job's ``hash`` or ``__init__`` could convert it; ``ShardPlanJob(num_shards=
    np.int64(4))`` is thus the job of ``num_shards=4``. Arguments without numpy scalars pass unchanged."""

    def __call__(cls, *args, **kwargs):
        for name, value in [*enumerate(args), *kwargs.items()]:
            if core.pure.nesting_depth(value, limit=MAX_ARGUMENT_DEPTH) > MAX_ARGUMENT_DEPTH:
                what = f"argument {name + 1}" if isinstance(name, int) else name
                raise ValueError(
                    f"{cls.__name__}: {what} nests dicts and lists more than {MAX_ARGUMENT_DEPTH} levels deep, more "
                    "than Sisyphus can hash (it walks arguments recursively): give it as the config has it"
                )
        return super().__call__(*plain_numbers(args), **plain_numbers(kwargs))


def check_absolute(path: Any, *, name: str) -> None:
    """Reject a relative path given as a str; a tk.Path (relative or not) is fine."""
    if isinstance(path, str) and not os.path.isabs(path):
        raise ValueError(f"{name}={path!r} is a relative path. {_RELATIVE_HINT}.")


def check_absolute_leaves(trees: List[Any], *, name: str) -> None:
    """Reject file trees with relative str leaves, listing how many and the first few."""
    relative = [
        leaf for tree in trees for leaf in core.pure.flatten(tree) if isinstance(leaf, str) and not os.path.isabs(leaf)
    ]
    if relative:
        raise ValueError(
            f"{name} holds {len(relative)} relative file names (first "
            f"{min(len(relative), _MAX_LISTED)}: {relative[:_MAX_LISTED]}). {_RELATIVE_HINT}."
        )


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
    installed = {
        os.path.realpath(p)
        for k, p in sysconfig.get_paths().items()
        if k in ("stdlib", "platstdlib", "purelib", "platlib")
    }
    roots = []
    for name in ["i6_shard"] + sorted(found):
        root = _module_root(name)
        if (
            not root
            or root in roots
            or os.path.realpath(root) in installed
            or os.path.basename(root) in ("site-packages", "dist-packages")
        ):
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


#: The i6_core-style resource request arguments and the keys of Sisyphus' rqmt they set, with their units.
RQMT_ARGS = {"time_rqmt": ("time", "hours"), "mem_rqmt": ("mem", "GB"), "cpu_rqmt": ("cpu", "CPUs")}


def check_rqmt_args(
    *, time_rqmt: Any = None, mem_rqmt: Any = None, cpu_rqmt: Any = None
) -> Dict[str, Union[int, float]]:
    """The resource requests given (i6_core's ``time_rqmt``, ``mem_rqmt``, ``cpu_rqmt``: hours, GB,
    CPUs) as Sisyphus' rqmt keys, in plain Python numbers; the ones not given (None) are left out.

    :raises TypeError, ValueError: for a value that is not a positive number (CPUs: a positive int)
    """
    given = {}
    for name, value in (("time_rqmt", time_rqmt), ("mem_rqmt", mem_rqmt), ("cpu_rqmt", cpu_rqmt)):
        if value is None:
            continue
        key, unit = RQMT_ARGS[name]
        if key == "cpu":
            given[key] = core.pure.check_int(value, name=name, minimum=1, hint="CPUs")
            continue
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"{name}={value!r} has type {type(value).__name__}; {name} must be a positive number ({unit})"
            )
        if not math.isfinite(value) or not value > 0:
            raise ValueError(f"{name}={value!r} must be a positive number ({unit})")
        given[key] = int(value) if isinstance(value, numbers.Integral) else float(value)
    return given


def sized_task(
    name: str, *, given: Dict[str, Union[int, float]], sized: Dict[str, Union[int, float]], mini: bool, **kwargs
) -> Task:
    """A task whose resource request is sized from its input, as i6_core's jobs take it: a mini task
    when the input is small (``mini``) and no request was given; else a task requesting ``sized``,
    overridden key by key by the requests ``given`` (see :func:`check_rqmt_args`)."""
    if mini and not given:
        return Task(name, mini_task=True, **kwargs)
    return Task(name, rqmt={**sized, **given}, **kwargs)


def round_up(value: float, *, step: float) -> float:
    """``value`` rounded up to a multiple of ``step`` (requests in tidy units), as an int when whole.

    >>> round_up(1.01, step=0.25), round_up(3.0, step=1)
    (1.25, 3)
    """
    rounded = math.ceil(value / step - 1e-9) * step
    return int(rounded) if float(rounded).is_integer() else rounded


def default_returnn_python_exe(returnn_python_exe: Optional[Union[tk.Path, str]]) -> Union[tk.Path, str]:
    """The Python that runs RETURNN, by the rule of i6_core's ``i6_core.util.get_returnn_python_exe``
    (through its ``get_executable_path``): the given path; else ``gs.RETURNN_PYTHON_EXE``; else the
    Python that runs Sisyphus (``shutil.which(gs.SIS_COMMAND[0])``, and ``sys.executable`` should
    that find nothing). A given str stays a str here (a name without "/" is looked up on PATH)."""
    if returnn_python_exe is not None:
        return returnn_python_exe
    from_settings = getattr(gs, "RETURNN_PYTHON_EXE", None)
    if from_settings is not None:
        return from_settings if isinstance(from_settings, tk.Path) else tk.Path(from_settings)
    command = gs.SIS_COMMAND[0] if getattr(gs, "SIS_COMMAND", None) else sys.executable
    return tk.Path(shutil.which(command) or sys.executable)


def default_returnn_root(returnn_root: Optional[Union[tk.Path, str]]) -> Optional[Union[tk.Path, str]]:
    """The RETURNN checkout to run, by the rule of i6_core's ``i6_core.util.get_returnn_root``: the
    given path; else ``gs.RETURNN_ROOT``. Where i6_core then fails, this gives None: the RETURNN
    installed for that Python (e.g. the PyPI package) is used."""
    if returnn_root is not None:
        return returnn_root
    from_settings = getattr(gs, "RETURNN_ROOT", None)
    if from_settings is not None:
        return from_settings if isinstance(from_settings, tk.Path) else tk.Path(from_settings)
    return None
