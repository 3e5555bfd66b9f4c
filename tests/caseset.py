"""The evaluation set in tests/cases/: load each case, run it through ``gpuhealth analyze``, score it.

Two splits: ``dev/`` (rules may be written against its cases) and ``sealed/`` (cases gathered first, from
repositories that dev/ does not use, and scored as they are: its score is the one that says how the
analyser does on evidence nobody here tuned it for). ``SPLITS`` names them.

A case is a folder with a ``case.toml`` (source, title, class, expect, confirmed_by, decidable) and the
evidence files the user posted. Every file that is not ``.toml`` (or a README) is handed to
``gpuhealth analyze``, in name order, the way a user would pass them on the command line.

The leading finding is the first root cause in the report's rendered order: the JSON report's
``root_causes`` list, which is ``report.common.fold`` over the findings, the same order the text
renderer prints. A case is a hit when that finding's code is ``expect``. A control case
(``expect = "no-critical"``) is a hit when nothing critical is raised.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CASES = Path(__file__).parent / "cases"
SPLITS = ("dev", "sealed")
FLOOR = CASES / "floor.toml"  # the dev split's floor; the sealed split is scored, never floored
CONTROL = "no-critical"
NOT_EVIDENCE = {"readme.md", "source.md"}

# class -> the codes that may lead for it (the project lead's table); None: the confirmed cause decides.
CLASSES: dict[str, tuple[str, ...] | None] = {
    "driver-library-mismatch": ("GH202",),
    "nouveau": ("GH206", "GH501"),
    "secure-boot": ("GH506",),
    "module-not-built-for-kernel": ("GH507",),
    "kernel-headers-missing": ("GH503",),
    "gcc-mismatch": ("GH505",),
    "build-tools-missing": ("GH504",),
    "driver-not-loaded": ("GH201",),
    "nvidia-smi-missing": ("GH208",),
    "cuda-newer-than-driver": ("GH601",),
    "several-cuda-libraries": ("GH602",),
    "stale-libcuda": ("GH603",),
    "cpu-only-pytorch": ("GH605",),
    "framework-cannot-use-gpu": ("GH610",),
    "arch-unsupported": ("GH606",),
    "cuda-library-missing": ("GH612",),
    "nvidia-uvm-missing": ("GH205",),
    "dev-nodes-missing": ("GH207",),
    **{f"xid-{n}": ("GH301",) for n in (13, 31, 43, 63, 64, 74, 94, 95, 119, 120)},
    "xid-48": ("GH301", "GH403"),
    "xid-79": ("GH302",),
    "rminit-adapter": ("GH303",),
    "pci-bar": ("GH304",),
    "probe-failed": ("GH305",),
    "gsp-firmware": ("GH611",),
    "fewer-gpus-than-pci": ("GH102",),
    "pcie-degraded": ("GH407",),
    "thermal": ("GH406",),
    "power-limit": ("GH412",),
    "ecc": ("GH403", "GH401", "GH402"),
    "persistence-mode": ("GH604",),
    "container-nvml-unknown-error": ("GH803",),
    "container-toolkit-missing": ("GH802",),
    "cuda-visible-devices": ("GH608",),
    "mig-change-pending": ("GH409",),
    "login-loop": None,
    "driver-gpu-unsupported": ("GH209",),
    "fabric-manager": ("GH210",),
    "nccl-iommu-acs": ("GH706",),
    "memory-held-idle": ("GH414",),
    "driver-parameters": ("GH804",),
    "mixed-install-routes": ("GH509",),
    "torch-extension-mismatch": ("GH627",),
    "gpu-bound-to-vfio": ("GH628",),
    "image-ships-driver-libs": ("GH802",),
    "not-a-fault": (CONTROL,),
}
REQUIRED = ("source", "title", "class", "expect", "confirmed_by", "decidable")
SOURCE = re.compile(r"^[\w.-]+/[\w.-]+#\d+$|^https?://\S+$")
CODE = re.compile(r"^GH\d{3}$")


class CaseError(ValueError):
    """A case folder that does not follow tests/cases/README.md."""


@dataclass(frozen=True)
class Case:
    name: str
    folder: Path
    source: str
    title: str
    cls: str
    expect: str
    confirmed_by: str
    decidable: bool
    evidence: tuple[Path, ...]
    also: tuple[str, ...] = ()  # other classes the confirmed cause covers (same expected code)

    @property
    def control(self) -> bool:
        return self.expect == CONTROL


@dataclass(frozen=True)
class Outcome:
    case: Case
    lead: str  # the leading finding's code, "none" when nothing was found, "error: ..." when analyze failed
    critical: tuple[str, ...]
    exit_code: int
    # the JSON findings whose action or impact is missing or outside the enums (docs/report-json.md): "GH301 action"
    unstamped: tuple[str, ...] = ()

    @property
    def hit(self) -> bool:
        if self.case.control:
            return not self.critical and not self.lead.startswith("error")
        return self.lead == self.case.expect


def load_case(folder: Path) -> Case:
    """Read and validate one case folder; CaseError says what is wrong."""
    try:
        data = tomllib.loads((folder / "case.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CaseError(f"{folder.name}/case.toml: {exc}") from exc
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise CaseError(f"{folder.name}/case.toml: missing {', '.join(missing)}")
    cls, expect = data["class"], data["expect"]
    if cls not in CLASSES:
        raise CaseError(f"{folder.name}: unknown class {cls!r} (see CLASSES in tests/caseset.py)")
    allowed = CLASSES[cls]
    if (allowed is not None and expect not in allowed) or (allowed is None and not CODE.match(expect)):
        raise CaseError(f"{folder.name}: class {cls} expects one of {allowed or 'GHnnn'}, not {expect!r}")
    if not SOURCE.match(data["source"]):
        raise CaseError(f"{folder.name}: source {data['source']!r} is neither owner/repo#N nor an address")
    if not isinstance(data["decidable"], bool):
        raise CaseError(f"{folder.name}: decidable must be true or false")
    also = _also(folder.name, data.get("also", []), expect)
    evidence = tuple(sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".toml"
                            and p.name.lower() not in NOT_EVIDENCE))
    if not evidence:
        raise CaseError(f"{folder.name}: no evidence file beside case.toml")
    return Case(folder.name, folder, data["source"], data["title"], cls, expect, data["confirmed_by"],
                data["decidable"], evidence, also)


def _also(name: str, also: object, expect: str) -> tuple[str, ...]:
    """`also`: classes besides `class` that the thread confirmed in the same evidence (e.g. the Xid 63
    page retirement that follows an Xid 48). Each must allow the case's expected code."""
    if not isinstance(also, list) or not all(isinstance(c, str) for c in also):
        raise CaseError(f"{name}: also must be a list of class names")
    for cls in also:
        allowed = CLASSES.get(cls, ())
        if cls not in CLASSES or (allowed is not None and expect not in allowed):
            raise CaseError(f"{name}: also names {cls!r}, which is not a class allowing {expect}")
    return tuple(also)


def uncovered(cases: list[Case]) -> list[str]:
    """Classes that no case covers, as `class` or in `also`: the gaps of the evaluation set."""
    covered = {c.cls for c in cases} | {cls for c in cases for cls in c.also}
    return [cls for cls in CLASSES if cls not in covered]


def case_folders(split: str = "dev") -> list[Path]:
    """The case folders of one split (``dev`` or ``sealed``), in name order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: one of {', '.join(SPLITS)}")
    root = CASES / split
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "case.toml").is_file())


def load_all(split: str = "dev") -> list[Case]:
    return [load_case(folder) for folder in case_folders(split)]


def run_case(case: Case) -> Outcome:
    """``gpuhealth analyze --format json FILES...`` in-process; the lead is the first root cause."""
    from click.testing import CliRunner

    from gpuhealth.cli import main

    result = CliRunner().invoke(main, ["analyze", "--format", "json", *map(str, case.evidence)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return Outcome(case, f"error: {type(result.exception).__name__}: {result.exception}", (), -1)
    try:
        document = json.loads(result.stdout)
    except ValueError:
        # no report (e.g. "could not read"); what analyze said is the lead
        said = (result.stdout or result.output).strip().splitlines()
        return Outcome(case, f"none (exit {result.exit_code}: {said[-1] if said else ''})", (), result.exit_code)
    roots = document.get("root_causes", [])
    lead = roots[0]["key"].split("@", 1)[0] if roots else "none"  # a key is "GH202@host"
    critical = tuple(f["code"] for f in document.get("findings", []) if f.get("severity") == "critical")
    return Outcome(case, lead, critical, result.exit_code, unstamped(document))


def unstamped(document: dict) -> tuple[str, ...]:
    """Each finding of a JSON report without a valid ``action`` or ``impact``, as "<code> <field>"."""
    from gpuhealth.model import ACTIONS, IMPACTS

    return tuple(f"{f.get('code')} {name}" for f in document.get("findings", [])
                 for name, allowed in (("action", ACTIONS), ("impact", IMPACTS)) if f.get(name) not in allowed)


@dataclass
class Scores:
    """Hit rates: overall and decidable over the fault cases, per class, and the controls apart."""

    outcomes: list[Outcome]
    per_class: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for outcome in self.outcomes:
            tally[outcome.case.cls][0] += outcome.hit
            tally[outcome.case.cls][1] += 1
        self.per_class = {cls: (hits, total) for cls, (hits, total) in sorted(tally.items())}

    @staticmethod
    def _rate(outcomes: list[Outcome]) -> float:
        return sum(o.hit for o in outcomes) / len(outcomes) if outcomes else 0.0

    @property
    def faults(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.case.control]

    @property
    def overall(self) -> float:
        return self._rate(self.faults)

    @property
    def decidable(self) -> float:
        return self._rate([o for o in self.faults if o.case.decidable])

    def class_rate(self, cls: str) -> float:
        hits, total = self.per_class.get(cls, (0, 0))
        return hits / total if total else 0.0

    def class_hits(self, cls: str) -> int:
        return self.per_class.get(cls, (0, 0))[0]

    @property
    def overall_hits(self) -> int:
        return sum(o.hit for o in self.faults)

    @property
    def decidable_hits(self) -> int:
        return sum(o.hit for o in self.faults if o.case.decidable)

    @property
    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.hit]


def load_floor() -> dict:
    if not FLOOR.is_file():
        return {}
    return tomllib.loads(FLOOR.read_text(encoding="utf-8"))


def render(scores: Scores, split: str = "dev") -> str:
    """The `make eval` report of one split: score per class, overall, then each miss with what led instead."""
    lines = [f"== {split} ({len(scores.outcomes)} cases)", f"{'class':32} {'hits':>9}  score"]
    for cls, (hits, total) in scores.per_class.items():
        lines.append(f"{cls:32} {hits:>4}/{total:<4}  {hits / total:6.1%}")
    faults = scores.faults
    decidable = [o for o in faults if o.case.decidable]
    controls = [o for o in scores.outcomes if o.case.control]
    lines += [
        "",
        f"overall    {sum(o.hit for o in faults)}/{len(faults)} = {scores.overall:.1%}",
        f"decidable  {sum(o.hit for o in decidable)}/{len(decidable)} = {scores.decidable:.1%}",
        f"controls   {sum(o.hit for o in controls)}/{len(controls)} raise nothing critical",
    ]
    gaps = uncovered([o.case for o in scores.outcomes]) if split == "dev" else []  # coverage is dev's concern
    if gaps:
        lines.append(f"no case yet: {', '.join(gaps)}")
    if scores.misses:
        lines += ["", "misses (case: expected <- what led instead):"]
        for o in scores.misses:
            got = o.lead if not o.case.control else f"critical {', '.join(o.critical) or o.lead}"
            flag = "" if o.case.decidable else "  [not decidable]"
            lines.append(f"  {o.case.name}: {o.case.expect} <- {got}{flag}")
    return "\n".join(lines) + "\n"
