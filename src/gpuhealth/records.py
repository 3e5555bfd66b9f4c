"""``@record``: ``@dataclass(frozen=True)``, cheaper to define.

Why: on Python 3.10-3.12 the standard decorator compiles each generated method (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``) with its own ``exec``. gpuhealth
defines about 80 frozen classes on the way to a verdict, and those compiles were the largest single
cost of the command's start-up (about a quarter of ``check --from``).

Here ``dataclasses.dataclass`` still reads the fields, so ``dataclasses.fields``, ``replace``, ``asdict``
and ``is_dataclass`` work unchanged; only ``__init__`` is generated (one ``exec``, at the class's first
instance, so a class a command never instantiates costs no compile); comparison, hash, repr and the
frozen ``__setattr__``/``__delattr__`` are closures over the field names, which cost no compile.
Behaviour is that of ``dataclass(frozen=True)`` (tests/test_records.py compares the two): equality
and hash over the fields in order, the same repr, ``FrozenInstanceError`` on assignment, defaults and
``default_factory``, ``__post_init__``; methods a class defines itself are kept. Features not handled
here (``InitVar``, ``init=False`` or keyword-only fields) raise TypeError at definition: use
``dataclass(frozen=True)`` for those.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError
from typing import Any, TypeVar

__all__ = ["record"]

T = TypeVar("T", bound=type)


class _Factory:
    """The default of a field with a ``default_factory``: ``__init__`` calls the factory when it sees it."""

    def __repr__(self) -> str:
        return "<factory>"


# dataclasses' own marker when it has one (so signatures compare equal), else an equivalent
_FACTORY: Any = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", None) or _Factory()
_PLACEHOLDER_DOC = "\0record"
_repr_running: set[tuple[int, int]] = set()  # (object, thread) whose repr is being built: a cycle prints "..."


def record(cls: T) -> T:
    """Make ``cls`` a frozen dataclass (see the module docstring)."""
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    if not cls.__doc__:
        cls.__doc__ = _PLACEHOLDER_DOC  # dataclass would compute a signature for it (slow, and before __init__)
    explicit_hash = "__hash__" in cls.__dict__ and not (cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__)
    dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    fields = dataclasses.fields(cls)
    _refuse_unhandled(cls, fields)
    names = tuple(f.name for f in fields)
    if cls.__doc__ == _PLACEHOLDER_DOC:
        cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
    _set(cls, "__init__", _lazy_init(cls, fields))
    if "__repr__" not in cls.__dict__:
        _set(cls, "__repr__", _repr(tuple(f.name for f in fields if f.repr)))
    compared = _getter(tuple(f.name for f in fields if f.compare))
    if "__eq__" not in cls.__dict__:
        _set(cls, "__eq__", _eq(compared))
    if not explicit_hash:
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        _set(cls, "__hash__", _hash(_getter(hashed)))
    frozen = frozenset(names)
    _set(cls, "__setattr__", _setattr(cls, frozen))
    _set(cls, "__delattr__", _delattr(cls, frozen))
    return cls


def _refuse_unhandled(cls: type, fields: tuple[Field[Any], ...]) -> None:
    initvar = getattr(dataclasses, "_FIELD_INITVAR", None)
    for f in cls.__dict__["__dataclass_fields__"].values():
        if getattr(f, "_field_type", None) is initvar:
            raise TypeError(f"{cls.__name__}.{f.name}: InitVar is not handled by @record; use @dataclass(frozen=True)")
    for f in fields:
        if not f.init or getattr(f, "kw_only", False) is True or f.name == "self":
            raise TypeError(f"{cls.__name__}.{f.name}: init=False, kw_only or the name 'self' is not handled by "
                            "@record; use @dataclass(frozen=True)")


def _set(cls: type, name: str, function: Callable[..., Any]) -> None:
    function.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, function)


def _lazy_init(cls: type, fields: tuple[Field[Any], ...]) -> Callable[..., None]:
    """Stands in for ``__init__`` until the first instance: a class never instantiated in a command
    never pays for the compile."""
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        made = _init(cls, fields)
        if cls.__dict__.get("__init__") is __init__:
            _set(cls, "__init__", made)
        made(self, *args, **kwargs)
    return __init__


def _init(cls: type, fields: tuple[Field[Any], ...]) -> Callable[..., None]:
    """The generated ``__init__`` (the one compile), storing through ``object.__setattr__`` as a frozen
    dataclass does."""
    scope: dict[str, Any] = {"__name__": cls.__module__, "__record_set__": object.__setattr__,
                             "__record_factory__": _FACTORY}
    params, body = ["self"], []
    for f in fields:
        value = f.name
        if f.default is not MISSING:
            scope[f"__record_default_{f.name}__"] = f.default
            params.append(f"{f.name}=__record_default_{f.name}__")
        elif f.default_factory is not MISSING:
            scope[f"__record_make_{f.name}__"] = f.default_factory
            params.append(f"{f.name}=__record_factory__")
            value = f"__record_make_{f.name}__() if {f.name} is __record_factory__ else {f.name}"
        else:
            params.append(f.name)
        body.append(f"    __record_set__(self, {f.name!r}, {value})\n")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()\n")
    source = f"def __init__({', '.join(params)}):\n" + ("".join(body) or "    pass\n")
    exec(source, scope)  # noqa: S102 - the source is built from the class's own field names
    made = scope["__init__"]
    made.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return made  # type: ignore[no-any-return]


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving the tuple of these attributes (what dataclass compares and hashes)."""
    if len(names) > 1:
        return operator.attrgetter(*names)  # type: ignore[return-value]
    if len(names) == 1:
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        key = (id(self), threading.get_ident())
        if key in _repr_running:
            return "..."
        _repr_running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            _repr_running.discard(key)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _eq(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented
    return __eq__


def _hash(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))
    return __hash__


def _setattr(cls: type, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)
    return __setattr__


def _delattr(cls: type, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)
    return __delattr__
