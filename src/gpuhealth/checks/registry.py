"""The check registry: every check has a stable code, a slug, an area and a documented docstring.

A check is a pure function ``(snapshot, expectations) -> iterable of Draft | Skip``. The engine stamps
each draft with the check's code, slug and explanation. Codes are grouped by area and never reused:

    GH0xx  gpuhealth itself and the evidence it was given
    GH1xx  GPUs on the PCI bus and what the driver sees
    GH2xx  driver, kernel modules, device nodes, nvidia-smi and NVML
    GH3xx  kernel log: Xid, NVRM, fallen off the bus, RmInitAdapter, BAR
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import field
from typing import Any

from gpuhealth.commands import fix as slotted
from gpuhealth.model import HOST, Candidate, Evidence, Fix, MessageLine, Severity, Snapshot, Subject
from gpuhealth.records import record

DOC_SECTIONS = ("What", "Why it matters", "How to fix", "Exceptions")
AREAS = {
    "GH0": "gpuhealth",
    "GH1": "PCI and GPU inventory",
    "GH2": "Driver, modules and tools",
    "GH3": "Kernel log",
    "GH4": "GPU health",
    "GH5": "Install readiness",
    "GH6": "CUDA and frameworks",
    "GH7": "Topology and active tests",
    "GH8": "Host environment",
}


@record
class Draft:
    """A finding before the engine stamps it with its check's code, slug and explanation."""

    severity: Severity
    message: str
    subject: Subject = HOST
    evidence: tuple[Evidence, ...] = ()
    fixes: tuple[Fix, ...] = ()
    explains: tuple[str, ...] = ()
    differential: tuple[Candidate, ...] = ()  # causes the evidence leaves open, likeliest first, each with its command
    labels: dict[str, str] = field(default_factory=dict)  # Finding.labels: what it stands on ({"xid": "48"})
    last_seen: float | None = None  # Finding.last_seen: the newest line's time, seconds since the epoch
    # Finding.action and .impact where this finding knows more than its check's row in knowledge/actions.csv
    # (GH301: the Xid's row; GH404: the recovery action the GPU names); "" takes the row.
    action: str = ""
    impact: str = ""


@record
class Skip:
    """A check that cannot judge: the reason is shown to the user, never counted as a pass."""

    reason: str


@record
class Expectations:
    """What the operator says this host should have (from the config file)."""

    gpu_count: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    nvlink_count: int | None = None  # active NVLinks per GPU, every model (GH701)
    pcie_width: int | None = None  # expected PCIe link width, every model (GH705)
    xid_rate_per_hour: int | None = None  # GH704: more than this many Xids of one code per GPU per hour
    models: dict[str, dict[str, int]] = field(default_factory=dict)  # product name -> {key: value}
    driver_params: dict[str, str] | None = None  # /proc/driver/nvidia/params name -> expected value (GH804)
    temperature_margin_c: int | None = None  # GH406: "near slowdown" margin in °C (None: the default, 5)
    ib_exclude: tuple[str, ...] = ()  # InfiniBand devices never read (/sys/class/infiniband names)
    ib_port_count: int | None = None  # GH720: InfiniBand/RoCE ports that should be ACTIVE
    ib_rate_gbps: int | None = None  # GH720: the rate each active port should have, in Gb/s
    # the cloud's instance type ([check] instance_type), for a VM whose firmware does not name it (Google Cloud,
    # Azure): looked up in knowledge/platforms.csv with the firmware's product name (checks/expected.py)
    instance_type: str = ""
    # GH101: the NVIDIA GPUs this host had on its PCI bus when last checked, and when (check --gpu-state FILE): a
    # host that had GPUs and now has none is a node whose GPUs vanished, not a CPU-only machine
    gpus_last_seen: int | None = None
    gpus_last_seen_at: str = ""
    gpus_last_seen_in: str = ""  # the state file, named in the finding


CheckFunction = Callable[[Snapshot, Expectations], Iterable["Draft | Skip"]]


@record
class CheckSpec:
    code: str
    slug: str
    title: str
    requires: tuple[str, ...]
    function: CheckFunction
    docs: Mapping[str, str]  # section -> text (``DocSections``: the docstring is split when first read)
    reads: tuple[str, ...] = ()  # fields it also weighs when present (their catalogue lines are its to judge)

    @property
    def area(self) -> str:
        return AREAS.get(self.code[:3], "other")

    @property
    def explanation(self) -> str:
        return self.docs.get("Why it matters", "")


class DocSections(Mapping[str, str]):
    """A check's docstring sections, split on first use: about 70 checks register on every run, and only
    ``explain``, the docs and the findings' explanations read them."""

    def __init__(self, doc: str) -> None:
        self._doc = doc
        self._sections: dict[str, str] | None = None

    def _split(self) -> dict[str, str]:
        if self._sections is None:
            self._sections = parse_doc_sections(self._doc)
        return self._sections

    def __getitem__(self, key: str) -> str:
        return self._split()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._split())

    def __len__(self) -> int:
        return len(self._split())

    def __repr__(self) -> str:
        return f"DocSections({self._split()!r})"


REGISTRY: dict[str, CheckSpec] = {}
_SLUG_CODES: dict[str, str] = {}  # slug -> the code it was registered under (a lookup, not a scan per check)
def is_code(text: str) -> bool:
    """``GH\\d{3}`` in full (a check code), without compiling a pattern at every start-up."""
    return len(text) == 5 and text.startswith("GH") and text[2:].isdecimal()


_SLUG_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def is_slug(text: str) -> bool:
    """``[a-z0-9]+(?:-[a-z0-9]+)*`` in full, without compiling a pattern at every start-up."""
    return all(part and _SLUG_CHARACTERS.issuperset(part) for part in text.split("-"))


def check(code: str, slug: str, title: str, requires: tuple[str, ...] = (),
          reads: tuple[str, ...] = ()) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check. ``requires`` names snapshot fields without which it is skipped; ``reads`` the
    fields it also weighs when present (so a catalogue line found in them is the check's to judge).

    The docstring must have the sections What / Why it matters / How to fix / Exceptions, each a
    line ending in a colon followed by text; ``gpuhealth explain`` and docs/checks/ print them.
    """

    def register(function: CheckFunction) -> CheckFunction:
        if not is_code(code) or not is_slug(slug):
            raise ValueError(f"bad check code or slug: {code} {slug}")
        taken = REGISTRY.get(_SLUG_CODES.get(slug, ""))
        if code in REGISTRY or (taken is not None and taken.slug == slug):
            raise ValueError(f"check code or slug registered twice: {code} {slug}")
        doc = function.__doc__ or ""
        # A cheap look for each header here; tests/test_engine.py splits every docstring and checks each section.
        missing = [s for s in DOC_SECTIONS if f"{s}:" not in doc]
        if missing:
            raise ValueError(f"{code} docstring lacks sections: {', '.join(missing)}")
        REGISTRY[code] = CheckSpec(code, slug, title, requires, function, DocSections(doc), reads)
        _SLUG_CODES[slug] = code
        return function

    return register


def parse_doc_sections(doc: str) -> dict[str, str]:
    """Split a docstring into its ``Section:`` blocks (dedented, paragraphs kept)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in doc.splitlines():
        line = raw.strip()
        if line.endswith(":") and line[:-1] in DOC_SECTIONS:
            current = sections.setdefault(line[:-1], [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def find(code_or_slug: str) -> CheckSpec | None:
    key = code_or_slug.strip()
    spec = REGISTRY.get(key.upper())
    return spec or next((s for s in REGISTRY.values() if s.slug == key.lower()), None)


# --------------------------------------------------------------------------- helpers for checks

def fixes_for(debian: Iterable[str] = (), rhel: Iterable[str] = (), anywhere: Iterable[str] = (),
              disruptive: bool = False, **values: object) -> tuple[Fix, ...]:
    """Fix commands for both distro families; ``disruptive`` marks reboots, reloads, killed jobs. The commands are
    templates: ``values`` fill their slots (``{kernel}``) through ``gpuhealth.commands``, the one way a value
    enters a command."""
    return (
        *(slotted(c, "debian", disruptive, **values) for c in debian),
        *(slotted(c, "rhel", disruptive, **values) for c in rhel),
        *(slotted(c, "any", disruptive, **values) for c in anywhere),
    )


def table_fixes(code: str, without: Iterable[str] = (), kind: str | None = None) -> tuple[Fix, ...]:
    """Check ``code``'s fixes as data (``knowledge/fixes.csv``), in the table's order, every distro family (a report
    shows the host's): the one place a fixed procedure is written, for the check's own findings and for those a
    pasted line raises. ``without``: commands of the procedure this finding does not need. ``kind``: the
    ``signatures.csv`` row the finding decoded (GH203's fixes per nvidia-smi/NVML error, rows ``GH203:<kind>``; none
    when the table has no row for it). Read on first use: only a finding asks for them."""
    from gpuhealth.knowledge.fixes import fixes_of

    fixes = fixes_of(f"{code}:{kind}" if kind else code)
    return tuple(f for f in fixes if f.command not in without) if without else fixes


MAX_LINE_EVIDENCE = 6  # pasted lines shown per source


def line_evidence(messages: Iterable[MessageLine], limit: int = MAX_LINE_EVIDENCE) -> tuple[Evidence, ...]:
    """Pasted evidence lines as Evidence: one per source, each line once, at most ``limit`` per source."""
    by_source: dict[str, list[str]] = {}
    for message in messages:
        lines = by_source.setdefault(message.source, [])
        if message.line not in lines:
            lines.append(message.line)
    return tuple(Evidence(source, tuple(lines[:limit])) for source, lines in by_source.items())
