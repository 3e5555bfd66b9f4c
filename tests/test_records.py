"""``@record`` behaves as ``@dataclass(frozen=True)`` (gpuhealth/records.py).

Each case defines the same class twice, once with each decorator, and compares what a caller can see:
construction (positional, keyword, defaults, factories, errors), repr, equality, hash, ``replace``,
``fields``, ``asdict``, frozen assignment and deletion, ``__post_init__``, copying, and the
methods a class defines itself. The model's own classes are then checked to be records and to round-trip.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, ClassVar

import pytest

from gpuhealth import model
from gpuhealth.records import record


def twins(body: dict[str, Any], annotations: dict[str, str]) -> tuple[type, type]:
    made = []
    for decorate in (dataclass(frozen=True), record):
        namespace = {"__annotations__": dict(annotations), "__module__": __name__, **body}
        made.append(decorate(type("Thing", (), namespace)))
    return made[0], made[1]


CASES: list[tuple[str, dict[str, Any], dict[str, str], list[tuple[tuple[Any, ...], dict[str, Any]]]]] = [
    ("plain", {}, {"a": "int", "b": "str"}, [((1, "x"), {}), ((), {"a": 2, "b": "y"}), ((1,), {"b": "z"})]),
    ("defaults", {"b": "", "c": None}, {"a": "int", "b": "str", "c": "int | None"},
     [((1,), {}), ((1, "q"), {}), ((1,), {"c": 5}), ((1, "q", 7), {})]),
    ("factory", {"d": field(default_factory=dict), "t": field(default=(), compare=False)},
     {"n": "int", "d": "dict[str, str]", "t": "tuple[int, ...]"},
     [((1,), {}), ((1, {"k": "v"}), {}), ((1, {}, (3,)), {})]),
    ("one field", {}, {"only": "float"}, [((1.5,), {}), ((float("nan"),), {})]),
    ("no fields", {}, {}, [((), {})]),
    ("repr and hash flags", {"hidden": field(default=0, repr=False), "unhashed": field(default=0, hash=False)},
     {"a": "int", "hidden": "int", "unhashed": "int"}, [((1,), {}), ((1, 2, 3), {})]),
    ("class variable", {"KIND": "k"}, {"a": "int", "KIND": "ClassVar[str]"}, [((1,), {})]),
]


def outcome(function: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", function(*args)
    except Exception as exc:  # the same error type counts as the same behaviour
        return "error", type(exc)


def _same_outcome(make: Any, other: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    return make(*args, **kwargs), other(*args, **kwargs)


@pytest.mark.parametrize(("name", "body", "annotations", "calls"), CASES, ids=[c[0] for c in CASES])
def test_record_behaves_as_a_frozen_dataclass(name: str, body: dict[str, Any], annotations: dict[str, str],
                                              calls: list[tuple[tuple[Any, ...], dict[str, Any]]]):
    stock, fast = twins(body, annotations)
    assert dataclasses.is_dataclass(fast)
    assert [(f.name, f.default, f.default_factory, f.repr, f.compare, f.hash) for f in dataclasses.fields(fast)] == \
           [(f.name, f.default, f.default_factory, f.repr, f.compare, f.hash) for f in dataclasses.fields(stock)]
    assert fast.__match_args__ == stock.__match_args__
    instances = []
    for args, kwargs in calls:
        a, b = _same_outcome(stock, fast, args, kwargs)
        instances.append((a, b))
        assert repr(a) == repr(b)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert outcome(hash, a) == outcome(hash, b)
        assert (a == copy.copy(a)) == (b == copy.copy(b))
        assert (b == a) is False  # another class: NotImplemented both ways, then identity
        assert b != object()
        for target in (a, b):
            for attribute in ([f.name for f in dataclasses.fields(target)] or ["new"]):
                with pytest.raises(FrozenInstanceError, match="cannot assign"):
                    setattr(target, attribute, 1)
                with pytest.raises(FrozenInstanceError, match="cannot delete"):
                    delattr(target, attribute)
        if dataclasses.fields(a):
            first = dataclasses.fields(a)[0].name
            changed_a = dataclasses.replace(a, **{first: getattr(a, first)})
            changed_b = dataclasses.replace(b, **{first: getattr(b, first)})
            assert repr(changed_a) == repr(changed_b)
    for (a1, b1), (a2, b2) in zip(instances, instances[1:], strict=False):
        assert (a1 == a2) == (b1 == b2)
    # the same errors for bad calls
    for args, kwargs in [((), {}), ((1, 2, 3, 4, 5), {}), ((), {"nope": 1})]:
        errors = []
        for make in (stock, fast):
            try:
                make(*args, **kwargs)
                errors.append(None)
            except TypeError as exc:
                errors.append(str(exc).split("__init__()")[-1])
        assert errors[0] == errors[1], errors
    assert inspect.signature(fast(*calls[0][0], **calls[0][1]).__init__) == \
           inspect.signature(stock(*calls[0][0], **calls[0][1]).__init__)


def test_factories_make_a_new_object_each_time():
    @record
    class Bag:
        items: dict[str, int] = field(default_factory=dict)
    one, two = Bag(), Bag()
    assert one.items == {} and one.items is not two.items


def test_post_init_runs_and_may_set_through_object():
    @record
    class Checked:
        value: int
        doubled: int = 0

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")
            object.__setattr__(self, "doubled", self.value * 2)
    assert Checked(3).doubled == 6
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def test_methods_a_class_defines_are_kept():
    @record
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7
    assert repr(Own(1)) == "own" and Own(1) == Own(2) and hash(Own(1)) == 7

    @record
    class EqOnly:  # an __eq__ without __hash__: dataclass(frozen=True) adds the field hash, so does record
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, EqOnly)
    assert hash(EqOnly(1)) == hash((1,))


def test_unhandled_features_are_refused_at_definition():
    with pytest.raises(TypeError, match="init=False"):
        @record
        class Hidden:
            a: int = field(default=0, init=False)
    with pytest.raises(TypeError, match="__setattr__"):
        @record
        class Setter:
            a: int

            def __setattr__(self, name: str, value: Any) -> None:
                pass


def test_a_recursive_repr_prints_dots():
    @record
    class Node:
        children: list[Any] = field(default_factory=list)
    node = Node()
    node.children.append(node)
    assert repr(node).endswith("Node(children=[...])")


def test_class_variables_are_not_fields():
    @record
    class Kinded:
        KIND: ClassVar[str] = "k"
        a: int = 0
    assert [f.name for f in dataclasses.fields(Kinded)] == ["a"]
    assert Kinded().KIND == "k"


def test_the_model_classes_are_records_and_round_trip():
    classes = [c for c in vars(model).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
               and c.__module__ == model.__name__]
    assert len(classes) >= 40
    for cls in classes:
        assert cls.__setattr__.__qualname__ == f"{cls.__qualname__}.__setattr__", cls
    gpu = model.Gpu(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-1", pci_address="0000:3b:00.0")
    report = model.Snapshot(origin="bundle", smi=model.SmiReport(gpus=(gpu,)))
    again = model.from_jsonable(model.Snapshot, model.to_jsonable(report))
    assert again == report and hash(again.gpus[0]) == hash(gpu)
    assert pickle.loads(pickle.dumps(report)) == report  # the parallel log scanner pickles its results
    assert copy.deepcopy(report) == report
    with pytest.raises(FrozenInstanceError):
        gpu.name = "x"  # type: ignore[misc]


def test_the_prewritten_init_templates_are_what_the_generator_writes():
    """src/gpuhealth/_record_inits.py holds the __init__ templates compiled with the package (no compile at
    start-up); regenerate it with `python -c "from gpuhealth.records import prewritten_source as s;
    open('src/gpuhealth/_record_inits.py', 'w').write(s())"` if the template changes."""
    from pathlib import Path

    import gpuhealth
    from gpuhealth.records import PREWRITTEN, _template, prewritten_source, template_source

    path = Path(gpuhealth.__file__).with_name("_record_inits.py")
    assert path.read_text() == prewritten_source()
    # a prewritten template and a compiled one take the same arguments in the same way
    for count in (0, 1, 7, PREWRITTEN):
        scope: dict = {}
        exec(compile(template_source(count), "<record>", "exec"), scope)  # noqa: S102
        compiled = scope["__init__"].__code__
        assert _template(count).co_varnames == compiled.co_varnames
        assert _template(count).co_argcount == compiled.co_argcount == count + 1
    assert _template(PREWRITTEN + 1).co_filename == "<record>"  # more fields than written out: compiled
