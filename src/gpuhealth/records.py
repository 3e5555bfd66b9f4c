"""``@record``: ``@dataclass(frozen=True)``, cheaper to define.

Why: on Python 3.10-3.12 the standard decorator compiles each generated method (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``) with its own ``exec``. gpuhealth
defines about 80 frozen classes on the way to a verdict, and those compiles were the largest single
cost of the command's start-up (about a quarter of ``check --from``).

Here ``dataclasses.dataclass`` still reads the fields, so ``dataclasses.fields``, ``replace``, ``asdict``
and ``is_dataclass`` work unchanged; ``__init__`` is a template compiled once per number of fields, given
the class's field names and defaults; comparison, hash, repr and the frozen ``__setattr__`` and
``__delattr__`` are closures over the field names. Defining a record compiles nothing.
Behaviour is that of ``dataclass(frozen=True)`` (tests/test_records.py compares the two): equality
and hash over the fields in order, the same repr, ``FrozenInstanceError`` on assignment, defaults and
``default_factory``, ``__post_init__``; methods a class defines itself are kept. Features not handled
here (``InitVar``, ``init=False`` or keyword-only fields) raise TypeError at definition: use
``dataclass(frozen=True)`` for those.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import sys
import threading
import types
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
    if not _collect_fields(cls):  # anything unusual: let dataclasses read the fields
        dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    fields = dataclasses.fields(cls)
    _refuse_unhandled(cls, fields)
    names = tuple(f.name for f in fields)
    if cls.__doc__ == _PLACEHOLDER_DOC:
        cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
    _set(cls, "__init__", _init(cls, fields))
    if "__repr__" not in cls.__dict__:
        _set(cls, "__repr__", _repr(tuple(f.name for f in fields if f.repr)))
    if "__eq__" not in cls.__dict__:
        _set(cls, "__eq__", _eq(tuple(f.name for f in fields if f.compare)))
    if not explicit_hash:
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        _set(cls, "__hash__", _hash(_getter(hashed)))
    frozen = frozenset(names)
    _set(cls, "__setattr__", _setattr(cls, frozen))
    _set(cls, "__delattr__", _delattr(cls, frozen))
    return cls


_FIELD_KIND = getattr(dataclasses, "_FIELD", None)
_SPECIAL_ANNOTATION = ("ClassVar", "InitVar", "KW_ONLY")


@functools.cache
def _params() -> Any:
    """The ``__dataclass_params__`` that ``dataclass(init=False, repr=False, eq=False)`` gives a class."""
    # a docstring, else dataclass would build one from inspect.signature (slow)
    plain = type("_Params", (), {"__doc__": "params"})
    return dataclasses.dataclass(init=False, repr=False, eq=False)(plain).__dataclass_params__


def _collect_fields(cls: type) -> bool:
    """Set ``cls``'s dataclass fields as ``dataclass(init=False, repr=False, eq=False)`` would, for the plain
    case (string annotations, no dataclass base, no ClassVar, InitVar or KW_ONLY); False, changing nothing,
    for anything else. dataclasses reads each annotation through several regular expressions and helper
    calls, most of what defining a record cost."""
    own = cls.__dict__
    annotations = own.get("__annotations__", {})
    if _FIELD_KIND is None or any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]):
        return False
    if not all(isinstance(t, str) for t in annotations.values()):
        return False
    joined = "\n".join(annotations.values())  # one look for the special words, not one per annotation
    if any(word in joined for word in _SPECIAL_ANNOTATION):
        return False
    if any(isinstance(v, Field) and k not in annotations for k, v in own.items()):
        return False  # dataclass raises its own error for a field without a type
    fields: dict[str, Field[Any]] = {}
    for name, kind in annotations.items():
        default = own.get(name, MISSING)
        if isinstance(default, Field):
            found = default
            found.name, found.type = name, kind
            found._field_type = _FIELD_KIND  # type: ignore[attr-defined]
            if getattr(found, "kw_only", None) is MISSING:
                found.kw_only = False  # type: ignore[attr-defined]
        else:
            if default is not MISSING and default.__class__.__hash__ is None:
                raise ValueError(f"mutable default {type(default)} for field {name} is not allowed: "
                                 "use default_factory")
            found = _plain_field(name, kind, default)
        if isinstance(default, Field):
            if found.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, found.default)
        fields[name] = found
    cls.__dataclass_fields__ = fields  # type: ignore[attr-defined]
    cls.__dataclass_params__ = _params()  # type: ignore[attr-defined]
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(fields)  # type: ignore[attr-defined]
    return True


def _plain_field(name: str, kind: str, default: Any) -> Field[Any]:
    """``dataclasses.field(default=default)`` as ``dataclass`` completes it for field ``name`` (its attributes set
    directly: the call and its keyword arguments were most of the cost of a record's ~10 fields)."""
    if not _FIELD_SLOTS_KNOWN:  # a Python whose Field has other attributes: let dataclasses make it
        found = dataclasses.field(default=default)
        found.name, found.type, found.kw_only, found._field_type = name, kind, False, _FIELD_KIND
        return found
    found = _new_object(Field)
    found.name, found.type, found.default, found.default_factory = name, kind, default, MISSING
    found.init, found.repr, found.hash, found.compare = True, True, None, True
    found.metadata, found.kw_only, found._field_type = _EMPTY_METADATA, False, _FIELD_KIND
    return found


_new_object = object.__new__
_FIELD_SLOTS_KNOWN = set(getattr(Field, "__slots__", ())) == {
    "name", "type", "default", "default_factory", "repr", "hash", "init", "compare", "metadata", "kw_only",
    "_field_type"}
# what ``dataclasses.field`` gives a field without metadata
_EMPTY_METADATA = dataclasses.field().metadata


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


def _init(cls: type, fields: tuple[Field[Any], ...]) -> Callable[..., None]:
    """The ``__init__``: a real function with the fields as its parameters and their defaults (so Python
    binds the arguments, and ``inspect.signature`` and the errors for bad calls are dataclass's), made
    from a template compiled once per number of fields; it hands the values to ``_filler``'s function,
    which stores them as a frozen dataclass does (past ``__setattr__``)."""
    names = tuple(f.name for f in fields)
    defaults: list[Any] = []
    for f in fields:
        if f.default is not MISSING:
            defaults.append(f.default)
        elif f.default_factory is not MISSING:
            defaults.append(_FACTORY)
        elif defaults:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    if sys.version_info >= (3, 11):  # one new code object, not two
        code = _template(len(names)).replace(co_varnames=("self", *names), co_qualname=f"{cls.__qualname__}.__init__")
    else:
        code = _template(len(names)).replace(co_varnames=("self", *names))
    scope = {"__name__": cls.__module__, "__record_fill__": _filler(cls, fields)}
    made = types.FunctionType(code, scope, "__init__", tuple(defaults) or None)
    made.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return made


@functools.cache
def _template(count: int) -> types.CodeType:
    """``def __init__(self, a0, .., aN): __record_fill__(self, (a0, .., aN))``: written out in
    ``_record_inits`` (bytecode compiled with the package) up to ``PREWRITTEN`` fields, compiled here once per
    N above that. Compiling ~20 of them cost every command's start-up about 2 % of its instructions."""
    if count <= PREWRITTEN:
        from gpuhealth import _record_inits

        return getattr(_record_inits, f"init_{count}").__code__  # type: ignore[no-any-return]
    scope: dict[str, Any] = {}
    exec(compile(template_source(count), "<record>", "exec"), scope)  # noqa: S102 - a fixed template
    return scope["__init__"].__code__  # type: ignore[no-any-return]


PREWRITTEN = 64


def template_source(count: int, name: str = "__init__") -> str:
    """The source of the ``__init__`` template for ``count`` fields (tests/test_records.py checks that
    ``_record_inits.py`` is these, for 0 to ``PREWRITTEN`` fields)."""
    params = [f"a{i}" for i in range(count)]
    values = "".join(p + ", " for p in params)
    return f"def {name}({', '.join(['self', *params])}):\n    __record_fill__(self, ({values}))\n"


def prewritten_source() -> str:
    """The text of ``_record_inits.py``."""
    head = ('"""Written by gpuhealth.records.prewritten_source(): the ``__init__`` templates of records, one per\n'
            'number of fields (see records._template). Do not edit; tests/test_records.py checks it."""\n'
            "# ruff: noqa\n"
            "# fmt: off\n")
    return head + "".join("\n\n" + template_source(count, f"init_{count}") for count in range(PREWRITTEN + 1))


def _filler(cls: type, fields: tuple[Field[Any], ...]) -> Callable[[Any, tuple[Any, ...]], None]:
    """Store the values: straight into the instance's ``__dict__`` (what ``object.__setattr__`` does for
    these plain attributes), then the factories' values, then ``__post_init__``."""
    names = tuple(f.name for f in fields)
    factories = tuple((f.name, f.default_factory) for f in fields if f.default_factory is not MISSING)
    post_init = hasattr(cls, "__post_init__")

    def fill(self: Any, values: tuple[Any, ...]) -> None:
        found = self.__dict__
        found.update(zip(names, values, strict=True))
        for name, factory in factories:
            if found[name] is _FACTORY:
                found[name] = factory()
        if post_init:
            self.__post_init__()
    return fill


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


def _eq(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    """dataclass's ``__eq__`` for this Python: up to 3.12 the fields compared as tuples (an identical
    object equals itself, even NaN); from 3.13 an identity check, then field by field."""
    if sys.version_info < (3, 13):
        key = _getter(names)

        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return key(self) == key(other)
            return NotImplemented
        return __eq__

    def __eq__(self: Any, other: Any) -> Any:  # noqa: F811 - one of the two, by version
        if self is other:
            return True
        if other.__class__ is self.__class__:
            result: Any = True
            for name in names:
                result = getattr(self, name) == getattr(other, name)
                if not result:
                    return result
            return result
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
