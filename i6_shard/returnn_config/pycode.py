"""Safe Python code for RETURNN configs: values become plain Python values and ASCII-only literals
(``ascii``/``repr`` of plain ``str``, never pasted text, never a subclass's own ``__repr__``), functions and
classes become imports, and i6_shard is put on ``sys.path``."""

from __future__ import annotations

import collections.abc
import functools
import keyword
import math
import numbers
import operator
import os
import site
import sys
from typing import Any, Callable, Dict, Mapping, Optional

from ..core.io import atomic_write

__all__ = ["resolve_paths"]

_ALIAS_PREFIX = "_i6_shard_"
#: Characters of an unsupported value shown in an error.
_MAX_SHOWN = 200


def plain_str(value: str) -> str:
    """The characters of ``value`` as a plain ``str``: ``numpy.str_`` and other ``str`` subclasses lose
    their type, and their own ``__repr__``, ``__str__`` or ``__format__`` never run.

    >>> import numpy as np
    >>> type(plain_str(np.str_("a.hdf"))), repr(plain_str(np.str_("a.hdf")))
    (<class 'str'>, "'a.hdf'")
    """
    if not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    return str.__str__(value)


def _plain_bytes(value: bytes) -> bytes:
    return bytes(memoryview(value))  # no __bytes__, no subclass


def plain_value(value: Any) -> Any:
    """A copy of ``value`` in plain Python types, for a config: every ``str`` (``numpy.str_``, subclasses,
    dict keys included) becomes a plain ``str``; an ``os.PathLike`` (not a Sisyphus path, which stays for its
    hash) becomes the plain ``str`` of ``os.fspath``; numpy and other numbers become ``int``, ``float`` or
    ``bool``; lists, tuples, dicts (any ``Mapping``) and ``functools.partial`` are rebuilt around plain
    values. Anything else (functions, classes, Sisyphus paths, i6_core wrappers) is kept as it is.

    >>> import numpy as np, pathlib
    >>> plain_value({np.str_("k"): [pathlib.PurePosixPath("/a.hdf"), (np.int64(3), np.float32(0.5))]})
    {'k': ['/a.hdf', (3, 0.5)]}
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return plain_str(value)
    if isinstance(value, bytes):
        return _plain_bytes(value)
    if is_sisyphus_path(value):
        return value
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        return plain_str(path) if isinstance(path, str) else _plain_bytes(path)
    if _is_numpy_bool(value):
        return bool(value)
    if isinstance(value, numbers.Number):
        if isinstance(value, numbers.Integral):
            return operator.index(value)  # an exact int, whatever the type (no subclass's __int__)
        if isinstance(value, float):
            return float.__float__(value)
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Rational):
            return float(value)
        return value
    if isinstance(value, list):
        return [plain_value(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):  # namedtuples stay as they are
        return tuple(plain_value(v) for v in value)
    if isinstance(value, collections.abc.Mapping):
        return {plain_value(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, functools.partial):
        args = [plain_value(v) for v in value.args]
        keywords = {plain_str(k): plain_value(v) for k, v in value.keywords.items()}
        if all(a is b for a, b in zip(args, value.args)) and all(
            type(k) is str and keywords[k] is v for k, v in value.keywords.items()
        ):
            return value  # already plain: the same object (its identity may matter to the caller)
        return functools.partial(value.func, *args, **keywords)
    return value


def _is_numpy_bool(value: Any) -> bool:
    np = sys.modules.get("numpy")  # only if loaded: a numpy bool cannot exist otherwise
    return np is not None and isinstance(value, np.bool_)


def _shown(value: Any) -> str:
    """A short repr for messages that runs no code of ``value``'s type."""
    if isinstance(value, str):
        text = repr(plain_str(value))
    elif value is None or type(value) in (bool, int, float):
        text = repr(value)
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _MAX_SHOWN else f"{text[:_MAX_SHOWN]}... ({len(text)} chars)"


def i6_shard_root() -> str:
    """The directory that holds the ``i6_shard`` package (what RETURNN needs on ``sys.path``)."""
    import i6_shard

    return os.path.dirname(os.path.dirname(os.path.abspath(i6_shard.__file__)))


def _in_site_packages(path: str) -> bool:
    """Whether ``path`` is a site-packages directory (this Python's, or any named so)."""
    dirs = list(site.getsitepackages())
    user = site.getusersitepackages()
    if isinstance(user, str):
        dirs.append(user)
    path = os.path.abspath(path)
    return path in {os.path.abspath(d) for d in dirs} or os.path.basename(path) in ("site-packages", "dist-packages")


def i6_shard_import_code() -> str:
    """Config code that lets RETURNN's Python, which may be another than the one writing the
    config, import i6_shard. Not part of any hash.

    - i6_shard imported from a checkout (``pip install -e``, ``PYTHONPATH``, a symlink in
      ``recipe/``): ``sys.path.insert(0, <checkout>)``, so RETURNN runs the i6_shard the config
      was built with, whether or not its Python has one installed;
    - i6_shard installed in site-packages: that whole directory must not go onto another Python's
      path, so the code only checks that RETURNN's Python has i6_shard, and else stops with an
      ImportError that names the fix.
    """
    import i6_shard

    root = i6_shard_root()
    if not _in_site_packages(root):
        return f"import sys\nsys.path.insert(0, {ascii(root)})\n"
    message = (
        f"this RETURNN config needs i6_shard, which this Python cannot import. It was written by a Python with "
        f"i6_shard {i6_shard.__version__} installed in its site-packages ({root}), a directory that cannot go onto "
        "another Python's sys.path. Either install the same i6_shard into this Python (<this python> -m pip install "
        "<i6_shard source>), or give the Sisyphus manager i6_shard as a checkout (git clone, then pip install -e, "
        "PYTHONPATH, or a symlink in recipe/): the config then puts the checkout on sys.path itself."
    )
    return (
        "try:\n    __import__('i6_shard')\nexcept ImportError as _i6_shard_error:\n"
        f"    raise ImportError({ascii(message)}) from _i6_shard_error\n"
    )


def is_sisyphus_path(value: Any) -> bool:
    """Duck-typed Sisyphus ``tk.Path``: has ``get_path`` and a Sisyphus hash (no sisyphus import)."""
    return not isinstance(value, str) and callable(getattr(value, "get_path", None)) and hasattr(value, "_sis_hash")


#: What a ``leaf`` rule of :func:`resolve_paths` returns for a value it leaves to the walk.
KEEP = object()


def _path_leaf(value: Any) -> Any:
    return value.get_path() if is_sisyphus_path(value) else KEEP


def resolve_paths(value: Any, *, leaf: Callable[[Any], Any] = _path_leaf) -> Any:
    """A copy of a dict/list/tuple structure (and the function and arguments of a ``functools.partial``) with
    every Sisyphus path replaced by its ``get_path()`` string: what RETURNN must see at run time, and what the
    checks look at. The one walker that turns Sisyphus values into plain ones: ``leaf`` is the rule for a single
    value (its replacement, or :data:`KEEP` to walk into it or keep it); the jobs' ``instantiate`` gives one that
    also replaces other delayed values by their value.

    >>> resolve_paths({"a": ("x", ["y"])})
    {'a': ('x', ['y'])}
    >>> resolve_paths([1, "a", 2], leaf=lambda v: v * 10 if isinstance(v, int) else KEEP)
    [10, 'a', 20]
    """
    replaced = leaf(value)
    if replaced is not KEEP:
        return replaced
    if isinstance(value, dict):
        return {k: resolve_paths(v, leaf=leaf) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_paths(v, leaf=leaf) for v in value]
    if type(value) is tuple:
        return tuple(resolve_paths(v, leaf=leaf) for v in value)
    if isinstance(value, functools.partial):
        return functools.partial(
            resolve_paths(value.func, leaf=leaf),
            *resolve_paths(list(value.args), leaf=leaf),
            **resolve_paths(dict(value.keywords), leaf=leaf),
        )
    return value


def resolve_import(module: str, qualname: str) -> Any:
    """The object ``qualname`` of ``module``, imported now: what an :class:`ImportRef` stands for.

    >>> resolve_import("os.path", "join") is os.path.join
    True
    """
    import importlib

    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class ImportRef:
    """A module-level class or function named by module and qualname, imported only where it is used.

    The builders put it where the object itself would go (a dataset dict's ``"class"``, the function a
    ``functools.partial`` binds), so that a Sisyphus manager builds graphs without importing what it names
    (i6_shard's RETURNN-side code, which needs RETURNN). It is written into configs as an import (classic
    configs through :class:`PyCode`) or as a call of :func:`resolve_import` (i6_core's V2 serializer and
    pickle, through ``__reduce__``), so RETURNN gets the object itself; called, it imports and calls it.
    Sisyphus hashes it exactly as the object it names (``hash_as``: the name the object had when job
    hashes were first made, so that moving it moves no job id).

    >>> ref = ImportRef("os.path", "join", kind="function")
    >>> ref("a", "b"), ref.resolve() is os.path.join
    ('a/b', True)
    """

    __slots__ = ("module", "qualname", "kind", "hash_as")

    def __init__(self, module: str, qualname: str, *, kind: str, hash_as: Optional[tuple] = None):
        if kind not in ("class", "function"):
            raise ValueError(f"kind={kind!r}: an ImportRef names a 'class' or a 'function'")
        self.module, self.qualname, self.kind = module, qualname, kind
        self.hash_as = tuple(hash_as) if hash_as is not None else (module, qualname)

    def resolve(self) -> Any:
        """The object, imported now (needs what its module needs, e.g. RETURNN)."""
        return resolve_import(self.module, self.qualname)

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __reduce__(self):  # pickle and i6_core's V2 serializer: the object itself where it is loaded
        return resolve_import, (self.module, self.qualname)

    def __copy__(self) -> "ImportRef":  # a reference stays one (copy would otherwise go through __reduce__)
        return self

    def __deepcopy__(self, memo: Any) -> "ImportRef":
        return self

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ImportRef) and (self.module, self.qualname) == (other.module, other.qualname)

    def __hash__(self) -> int:
        return hash((self.module, self.qualname))

    def __repr__(self) -> str:
        return f"ImportRef({self.module}.{self.qualname})"

    def _sis_hash(self) -> bytes:
        """The bytes ``sisyphus.hash.sis_hash_helper`` gives the named class (of metaclass ``type``) or function."""
        from sisyphus.hash import sis_hash_helper

        type_name = b"type" if self.kind == "class" else b"function"
        return b"(" + type_name + b", " + sis_hash_helper(self.hash_as) + b")"


def resolve_refs(value: Any) -> Any:
    """A copy of a dict/list/tuple structure (``functools.partial`` included) with every :class:`ImportRef`
    replaced by the object it names, imported now: a builder's dataset dict as RETURNN gets it from a written
    config, for in-process use (``init_dataset(resolve_refs(d))``, in a Python that has RETURNN).

    >>> resolve_refs({"f": [ImportRef("os.path", "join", kind="function")]})["f"][0] is os.path.join
    True
    """
    if isinstance(value, ImportRef):
        return value.resolve()
    if isinstance(value, dict):
        return {k: resolve_refs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v) for v in value]
    if type(value) is tuple:
        return tuple(resolve_refs(v) for v in value)
    if isinstance(value, functools.partial):
        return functools.partial(
            resolve_refs(value.func), *resolve_refs(list(value.args)), **resolve_refs(dict(value.keywords))
        )
    return value


def _importable_name(obj: Any) -> Optional[tuple]:
    if isinstance(obj, ImportRef):
        return obj.module, obj.qualname
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    module, qualname = plain_str(module), plain_str(qualname)
    if not qualname.isidentifier() or module == "__main__" or not all(p.isidentifier() for p in module.split(".")):
        return None
    mod = sys.modules.get(module)
    if mod is None or getattr(mod, qualname, None) is not obj:
        return None
    return module, qualname


class PyCode:
    """Collects the imports that the expressions it renders need.

    >>> print(PyCode().expr({"f": ["it's", "a\\nb", "\\u00e4", "');import os;('"]}))
    {'f': ["it's", 'a\\nb', '\\xe4', "');import os;('"]}
    """

    def __init__(self):
        self._imports: Dict[str, str] = {}  # alias -> import line
        self._aliases: Dict[tuple, str] = {}  # (module, qualname) -> alias
        self.needs_sys_path = False

    def ref(self, obj: Any) -> str:
        """The name under which a module-level function or class is imported into the config."""
        name = _importable_name(obj)
        if name is None:
            raise TypeError(
                f"{obj!r} cannot go into a RETURNN config: only module-level functions and classes that can be "
                "imported by module and name can (no lambdas, closures, or objects defined in __main__)"
            )
        if name not in self._aliases:
            module, qualname = name
            alias = _ALIAS_PREFIX + qualname
            suffix = 1
            while alias in self._imports:
                suffix += 1
                alias = f"{_ALIAS_PREFIX}{qualname}_{suffix}"
            self._aliases[name] = alias
            self._imports[alias] = f"from {module} import {qualname} as {alias}"
            if module == "i6_shard" or module.startswith("i6_shard."):
                self.needs_sys_path = True
        return self._aliases[name]

    def expr(self, value: Any, *, where: str = "value") -> str:
        """An expression that evaluates to ``value`` in plain Python types: strings of any str type are
        ASCII-escaped literals of a plain ``str`` (``numpy.str_`` or a subclass's own ``__repr__`` never
        shows), numbers are ``int``/``float`` literals."""
        if value is None or isinstance(value, bool):
            return repr(value)
        if _is_numpy_bool(value):
            return repr(bool(value))
        if isinstance(value, numbers.Integral):  # also numpy integers
            return int.__repr__(operator.index(value))
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Rational):
            value = float.__float__(value) if isinstance(value, float) else float(value)
            return float.__repr__(value) if math.isfinite(value) else f"float({float.__repr__(value)!r})"
        if isinstance(value, str):
            return ascii(plain_str(value))
        if isinstance(value, bytes):
            return bytes.__repr__(_plain_bytes(value))
        if is_sisyphus_path(value):
            return self.expr(value.get_path(), where=where)
        if isinstance(value, os.PathLike):
            path = os.fspath(value)
            return ascii(plain_str(path)) if isinstance(path, str) else bytes.__repr__(_plain_bytes(path))
        if isinstance(value, list):
            return "[" + ", ".join(self.expr(v, where=f"{where}[{i}]") for i, v in enumerate(value)) + "]"
        if type(value) is tuple:
            items = [self.expr(v, where=f"{where}[{i}]") for i, v in enumerate(value)]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if type(value) is dict:
            return (
                "{"
                + ", ".join(
                    f"{self.expr(k, where=f'{where} key')}: {self.expr(v, where=f'{where}[{_shown(k)}]')}"
                    for k, v in value.items()
                )
                + "}"
            )
        if isinstance(value, functools.partial):
            args = [self.ref(value.func)]
            args += [self.expr(a, where=f"{where} arg {i}") for i, a in enumerate(value.args)]
            for k, v in value.keywords.items():
                k = plain_str(k)
                v_code = self.expr(v, where=f"{where} keyword {k}")
                args.append(
                    f"{k}={v_code}" if k.isidentifier() and not keyword.iskeyword(k) else f"**{{{ascii(k)}: {v_code}}}"
                )
            return f"{self.ref(functools.partial)}({', '.join(args)})"
        if isinstance(value, (type, ImportRef)) or callable(value) and _importable_name(value) is not None:
            return self.ref(value)
        raise TypeError(
            f"{where}: {type(value).__name__} {_shown(value)} has no safe literal for a RETURNN config; "
            "use str, numbers, bool, None, lists, tuples, dicts, paths, module-level functions/classes "
            "or functools.partial of them"
        )

    def prelude(self) -> str:
        """:func:`i6_shard_import_code` (when i6_shard is needed) and the imports."""
        code = i6_shard_import_code() if self.needs_sys_path else ""
        return code + "".join(self._imports[a] + "\n" for a in self._imports)


def config_code(config: Mapping[str, Any]) -> str:
    """A Python RETURNN config (``#!rnn.py``) that defines every key of ``config``.

    >>> print(config_code({"num_epochs": 2, "train": {"class": "HDFDataset", "files": ["a'b.hdf"]}}), end="")
    #!rnn.py
    num_epochs = 2
    train = {'class': 'HDFDataset', 'files': ["a'b.hdf"]}
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config has type {type(config).__name__}; give a dict of RETURNN config keys and values")
    code = PyCode()
    body = []
    for key, value in config.items():
        key = plain_str(key) if isinstance(key, str) else key
        if not isinstance(key, str) or not key.isascii() or not key.isidentifier() or keyword.iskeyword(key):
            raise ValueError(f"config key {_shown(key)} is not an ASCII Python identifier; RETURNN config keys must be")
        body.append(f"{key} = {code.expr(value, where=key)}\n")
    return "#!rnn.py\n" + code.prelude() + "".join(body)


def write_returnn_config(path: str | os.PathLike, config: Mapping[str, Any]) -> None:
    """Write :func:`config_code` to ``path`` atomically (ASCII, so any locale reads it)."""
    text = config_code(config)
    with atomic_write(path, "wt", encoding="ascii") as f:
        f.write(text)
