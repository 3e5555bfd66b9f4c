"""Driver branches and GPU architectures, from ``drivers.csv``; the CUDA toolkits from ``cuda_drivers.csv``.

One fact per row: ``kind,key,field,value,source``, every row with the document (title and address) it
comes from, or "not confirmed (...)" where no source gives it. Kinds:

- ``arch``: per architecture ``first_branch`` (earliest driver branch with evidence: CUDA release notes),
  ``last_branch`` (the legacy branch that is its last, 3.1), ``open_modules`` (``unsupported``,
  ``supported`` or ``required``, 3.3), ``first_toolkit`` and ``last_toolkit_major`` (CUDA toolkits that
  can target it, 3.1/3.2).
- ``branch``: per driver branch ``designation`` (``legacy``, ``Long Term Support Branch``, ``Production
  Branch``, ``New Feature Branch``, 2.5/3.1), ``end_of_life`` (``YYYY-MM``), ``cuda`` (the CUDA version
  the branch reports natively, 2.4), ``last_for`` (the architectures a legacy branch is the last for).
- ``wheel``: PyTorch wheel variants: ``cuda`` (the CUDA version each is built for, not in the sourced
  tables), ``archs`` (the compute capabilities its kernels are built for, ``TORCH_CUDA_ARCH_LIST`` of
  PyTorch's wheel build script, "+PTX" where PTX is kept too) and ``torch_below`` (the first PyTorch release
  the archs row does not cover, where the source bounds it).
- ``installer``: options of the ``.run`` installer (nvidia-installer) and the first version that has them.
- ``fabric``: Fabric Manager facts (package names, what happens without it) for NVSwitch systems.

The CUDA toolkits (per major.minor the driver its GA release bundles, 2.1) and the minor-version
compatibility minimum per CUDA major version (2.2) are ``cuda_drivers.csv``'s facts: one table per fact,
read from there (:func:`toolkits`, :func:`family_minimum`).

Rules applied by ``cuda_support`` (NVIDIA's CUDA Compatibility guide): a toolkit whose bundled driver is of
this branch or older
runs natively (backward compatibility); a newer toolkit of a major family whose minimum the branch meets
runs through minor-version compatibility, with a limited feature set (PTX JIT of newer PTX may fail).
A toolkit must also be able to target the architecture (``first_toolkit``, ``last_toolkit_major``).
"""

from __future__ import annotations

import functools
from dataclasses import field

from gpuhealth.knowledge import table_rows
from gpuhealth.knowledge.gpus import ARCHITECTURES
from gpuhealth.records import record

__all__ = ["Architecture", "Branch", "CudaSupport", "Toolkit", "Wheel", "architecture", "branch", "branches",
           "branch_of", "cuda_support", "fact", "family_minimum", "rows", "supports", "toolkits", "version_key",
           "wheels"]

CURRENT = ("Long Term Support Branch", "Production Branch", "New Feature Branch")
OPEN_VALUES = ("unsupported", "supported", "required")


@record
class Architecture:
    name: str
    first_branch: int | None = None  # None: older than every branch in the table
    last_branch: int | None = None  # the legacy branch that is its last; None: still current
    open_modules: str = "unsupported"
    first_toolkit: str | None = None
    last_toolkit_major: int | None = None
    sources: dict[str, str] = field(default_factory=dict)  # field -> source


@record
class Branch:
    number: int
    designation: str | None = None  # None: end of life (NVIDIA's Supported Drivers and CUDA Toolkit Versions "Others")
    end_of_life: str | None = None  # "2028-06"
    cuda: str | None = None  # the CUDA version it reports natively (nvidia-smi "CUDA Version")
    last_for: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def legacy(self) -> bool:
        return self.designation == "legacy"

    @property
    def current(self) -> bool:
        return self.designation in CURRENT

    @property
    def architectures(self) -> tuple[str, ...]:
        """The architectures this branch supports (from each architecture's first and last branch)."""
        return tuple(a for a in ARCHITECTURES if supports(self.number, a))


@record
class Toolkit:
    version: str  # "12.8"
    min_driver: str  # "570.26"
    source: str  # cuda_drivers.csv's source column (document keys: knowledge.sources.cite turns them to words)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def branch(self) -> int:
        return int(self.min_driver.split(".")[0])


@record
class Wheel:
    variant: str  # "cu128"
    cuda: str
    source: str
    archs: tuple[str, ...] = ()  # ("3.7", "5.0", ..., "12.0+PTX"); empty: not known
    archs_source: str = ""
    torch_below: str | None = None  # "2.6": the archs are confirmed for releases before this one only

    def runs_on(self, compute_capability: str | None) -> bool | None:
        """Whether the wheel has kernels for ``compute_capability``: SASS of the same major version and an
        equal or lower minor (CUDA's binary compatibility), or PTX of an equal or lower capability (JIT).
        None when the arch list or the capability is unknown."""
        if not self.archs or not compute_capability:
            return None
        have = _cc(compute_capability)
        for arch in self.archs:
            built = _cc(arch.removesuffix("+PTX"))
            if built[0] == have[0] and built[1] <= have[1]:
                return True
            if arch.endswith("+PTX") and built <= have:
                return True
        return False


def _cc(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().partition(".")
    return int(major), int(minor or 0)


@record
class CudaSupport:
    """The CUDA toolkits a branch runs for an architecture."""

    native: tuple[str, ...] = ()  # backward compatibility: the toolkit's driver is this branch or older
    minor_compat: tuple[str, ...] = ()  # minor-version compatibility: limited features


@record
class Row:
    kind: str
    key: str
    field: str
    value: str
    source: str


def version_key(version: str) -> tuple[int, ...]:
    """``12.8`` -> (12, 8); ``570.124.06`` -> (570, 124, 6)."""
    return tuple(int(p) for p in version.split(".") if p.isdigit() and len(p) < 10)


def branch_of(version: str | None) -> int | None:
    """The branch of a driver version: ``535.161.08`` -> 535."""
    head = (version or "").strip().split(".")[0]
    return int(head) if head.isdigit() and len(head) < 10 else None


def rows() -> tuple[Row, ...]:
    return _data()["rows"]


def architecture(name: str) -> Architecture | None:
    return _data()["arch"].get(name)


def branch(number: int) -> Branch | None:
    return _data()["branch"].get(number)


def branches() -> tuple[Branch, ...]:
    """Every branch in the table, oldest first."""
    return tuple(sorted(_data()["branch"].values(), key=lambda b: b.number))


@functools.cache
def toolkits() -> tuple[Toolkit, ...]:
    """Every CUDA toolkit minor version with the driver its GA release bundles (``cuda_drivers.csv``)."""
    from gpuhealth.knowledge.cuda_drivers import minor_releases

    return tuple(Toolkit(r.cuda, r.driver_min, r.source) for r in minor_releases())


def wheels() -> tuple[Wheel, ...]:
    return _data()["wheel"]


def family_minimum(major: int) -> int | None:
    """The minimum driver branch for minor-version compatibility within CUDA ``major`` (11, 12, 13)."""
    from gpuhealth.knowledge import cuda_drivers

    row = cuda_drivers.family_minimum(str(major))
    return branch_of(row.driver_min) if row is not None else None


def supports(branch_number: int, arch_name: str) -> bool:
    """Whether a driver branch supports an architecture (between its first and its last branch)."""
    arch = architecture(arch_name)
    if arch is None:
        return False
    if arch.first_branch is not None and branch_number < arch.first_branch:
        return False
    return arch.last_branch is None or branch_number <= arch.last_branch


def cuda_support(branch_number: int, arch_name: str | None = None) -> CudaSupport:
    """The CUDA toolkits a branch runs (natively, or through minor-version compatibility), limited to
    those that can target ``arch_name`` when given."""
    arch = architecture(arch_name) if arch_name else None
    native, minor = [], []
    for kit in toolkits():
        if arch is not None:
            if arch.first_toolkit and version_key(kit.version) < version_key(arch.first_toolkit):
                continue
            if arch.last_toolkit_major is not None and kit.major > arch.last_toolkit_major:
                continue
        if kit.branch <= branch_number:
            native.append(kit.version)
        else:
            minimum = family_minimum(kit.major)
            if minimum is not None and branch_number >= minimum:
                minor.append(kit.version)
    return CudaSupport(tuple(native), tuple(minor))


@functools.cache
def _data() -> dict:
    table = tuple(Row(r["kind"], r["key"], r["field"], r["value"], r["source"])
                  for r in table_rows("drivers.csv"))
    seen: set[tuple[str, str, str]] = set()
    arch_fields: dict[str, dict[str, str]] = {}
    branch_fields: dict[int, dict[str, str]] = {}
    sources: dict[tuple[str, str], dict[str, str]] = {}
    wheel_fields: dict[str, dict[str, Row]] = {}
    other: dict[tuple[str, str, str], Row] = {}
    for row in table:
        if (row.kind, row.key, row.field) in seen:
            raise ValueError(f"drivers.csv: {row.kind} {row.key} {row.field} appears twice")
        seen.add((row.kind, row.key, row.field))
        if not row.source.strip():
            raise ValueError(f"drivers.csv: {row.kind} {row.key} {row.field} has no source")
        sources.setdefault((row.kind, row.key), {})[row.field] = row.source
        if row.kind == "arch":
            if row.key not in ARCHITECTURES:
                raise ValueError(f"drivers.csv: unknown architecture {row.key!r}")
            arch_fields.setdefault(row.key, {})[row.field] = row.value
        elif row.kind == "branch":
            branch_fields.setdefault(int(row.key), {})[row.field] = row.value
        elif row.kind == "wheel":
            wheel_fields.setdefault(row.key, {})[row.field] = row
        elif row.kind in ("installer", "fabric"):
            other[(row.kind, row.key, row.field)] = row
        else:
            raise ValueError(f"drivers.csv: unknown kind {row.kind!r}")
    archs = {}
    for name, values in arch_fields.items():
        if values.get("open_modules", "unsupported") not in OPEN_VALUES:
            raise ValueError(f"drivers.csv: {name}: open_modules must be one of {OPEN_VALUES}")
        archs[name] = Architecture(
            name, _int(values.get("first_branch")), _int(values.get("last_branch")),
            values.get("open_modules", "unsupported"), values.get("first_toolkit"),
            _int(values.get("last_toolkit_major")), sources[("arch", name)])
    found = {}
    for number, values in branch_fields.items():
        found[number] = Branch(number, values.get("designation"), values.get("end_of_life"), values.get("cuda"),
                               tuple(values.get("last_for", "").split()) if values.get("last_for") else (),
                               sources[("branch", str(number))])
    wheel_rows = []
    for variant, fields in wheel_fields.items():
        built = fields.get("archs")
        below = fields.get("torch_below")
        wheel_rows.append(Wheel(variant, fields["cuda"].value, fields["cuda"].source,
                                tuple(built.value.split(";")) if built else (), built.source if built else "",
                                below.value if below else None))
    wheel_rows.sort(key=lambda w: version_key(w.cuda))
    return {"rows": table, "arch": archs, "branch": found, "wheel": tuple(wheel_rows), "other": other}


def fact(kind: str, key: str, field_name: str) -> Row | None:
    """An ``installer`` or ``fabric`` row: its value and source."""
    return _data()["other"].get((kind, key, field_name))


def _int(text: str | None) -> int | None:
    return int(text) if text else None
