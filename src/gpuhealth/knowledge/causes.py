"""Symptoms and their candidate causes: the table behind a differential diagnosis.

``symptoms.csv`` lists what a user sees ("nvidia-smi cannot talk to the driver"), with the symptom's
own severity and the check code a symptom-level finding is reported under, and, in ``causes``, its
candidate causes in order of prior likelihood (most common first, from the field reports and public
threads). ``causes.csv`` describes each cause once: the check code that confirms it when it fires
(a cause is ruled out when that check ran clean, and open when it was skipped), the evidence that
confirms or rules it out in words, and the exact command whose output decides; optionally, in ``fix``, the fix
once it is confirmed, where the check it shares with other causes has fixes for all of them, and in ``fixed`` the cause
in the past tense, said where the reporter's fix confirms it (and it is fixed, per the reporter).

A cause may explain several symptoms (Secure Boot refusing the module explains both "module refuses
to load" and "nvidia-smi cannot talk to the driver"); it is described once, and each symptom lists
it at its own rank. ``Symptom.causes`` holds copies whose ``symptom`` and ``prior`` are those of that
symptom; ``cause(id)`` returns the cause as listed under the first symptom that names it.

``rules_out.csv`` says what a catalogue line rules OUT: a row names a signature (``signatures.csv``), a cause
that line excludes, why in words, and the document that shows it ("Found no NVIDIA driver on your system"
is printed only by a CUDA build of PyTorch, so it rules out a CPU-only build). A line can confirm at most
one cause (its ``cause`` column); this table lets it also exclude others, so the ranking follows what the
message itself says rather than how common each cause is.

``states_rule_out.csv`` says what a STATE that a program's output shows rules out, whatever line it holds: the nvidia
kernel module shown loaded (nvidia-smi or NVML answering, ``lsmod``, ``/proc/driver/nvidia/version``), ``docker info``
listing the nvidia runtime, ``ls -l /dev/nvidia*`` listing ``nvidia-uvm``. A row names the state
(``checks/machine_state.py`` reads it from the snapshot), the causes it rules out, why, the symptoms for which it does
not hold (``not_for``: the cause would concern another GPU there, or another moment), the symptoms it contradicts (a
paste that shows both holds two moments: the row rules nothing out for them, and a symptom only a person's words tell
yields to it), and the tool's document that says what its output means.

The files are read once, lazily, on first use.
"""

from __future__ import annotations

import functools

from gpuhealth.knowledge import table_rows
from gpuhealth.records import record

__all__ = ["RESERVED_CODES", "Cause", "Exclusion", "StateExclusion", "Symptom", "cause", "causes", "exclusions",
           "state_exclusions", "symptoms"]

# Codes that checks do not register (yet) but findings may carry: reserved in the project's code list
# for helper `analyze` (symptom and cause findings that no check raises on its own).
RESERVED_CODES = frozenset({"GH003", "GH004", "GH209", "GH210", "GH414", "GH612", "GH706", "GH901"})
_SEVERITIES = ("info", "warning", "critical")


@record
class Cause:
    id: str  # "secure-boot-refused"
    symptom: str  # the symptom it explains (as listed under that symptom)
    title: str  # "Secure Boot refused the unsigned nvidia module"
    code: str  # the check that confirms it when it fires
    prior: int  # rank under its symptom when the evidence is silent (1 = most common)
    confirm: str  # the evidence that confirms it, in words
    rule_out: str  # the evidence that rules it out, in words
    decide: str  # the exact command whose output decides
    source_title: str
    source_url: str
    # the fix once it is confirmed, where its check's own fixes cover several causes (GH605 lists a CUDA wheel and
    # `modprobe nvidia_uvm` alike): optional, and shown only for this cause
    fix: str = ""
    # the cause in the past tense, for a cause a fix the reporter says worked confirms ("the nouveau driver owned the
    # GPU"): the finding then tells what was, not what is (checks/diagnosis.py); every cause a fix_phrases.csv row names
    # has one
    fixed: str = ""


@record
class Symptom:
    id: str  # "driver-unreachable"
    title: str  # "nvidia-smi cannot talk to the driver"
    severity: str  # info | warning | critical: the symptom's own severity
    code: str  # the code of a symptom-level finding when no cause is confirmed
    causes: tuple[Cause, ...]  # ordered by prior
    # whether a finding of ``code`` alone shows the symptom. "no" where the check reports more than this symptom:
    # GH305 also reports a probe that failed with an error, which no other driver explains (bbswitch#61)
    check_shows: bool = True


@record
class Exclusion:
    signature: str  # the catalogue row whose line rules the cause out
    cause: str  # the cause it rules out
    why: str  # why, in words ("only a CUDA build of PyTorch prints it")
    source_title: str
    source_url: str


@record
class StateExclusion:
    state: str  # the state a program's output shows (checks/machine_state.py): "lsmod-lists-nvidia"
    causes: tuple[str, ...]  # the causes it rules out
    why: str  # why, in words
    not_for: frozenset[str]  # symptoms for which it rules none of them out (another GPU, another moment)
    contradicts: frozenset[str]  # symptoms the state says are not so (a paste showing both holds two moments)
    source_title: str
    source_url: str


def symptoms() -> dict[str, Symptom]:
    """Every symptom by id, in file order."""
    return _tables()[0]


def cause(cause_id: str) -> Cause:
    """The cause with this id (KeyError when there is none)."""
    return _tables()[1][cause_id]


def causes() -> dict[str, Cause]:
    """Every cause by id, each as listed under the first symptom that names it."""
    return _tables()[1]


def exclusions() -> dict[str, tuple[Exclusion, ...]]:
    """The causes each signature's line rules out, by signature id."""
    return _exclusions()


def state_exclusions() -> tuple[StateExclusion, ...]:
    """The rows of ``states_rule_out.csv``, in file order."""
    return _state_exclusions()


def _read(name: str) -> list[dict[str, str]]:
    return [{k: (v or "").strip() for k, v in row.items() if k is not None} for row in table_rows(name)]


def _causes_by_id() -> dict[str, Cause]:
    found: dict[str, Cause] = {}
    for number, row in enumerate(_read("causes.csv"), start=2):
        for column in ("id", "title", "code", "confirm", "rule_out", "decide", "source_title", "source_url"):
            if not row.get(column):
                raise ValueError(f"causes.csv line {number}: {column} is empty")
        if row["id"] in found:
            raise ValueError(f"causes.csv: cause {row['id']!r} appears twice")
        found[row["id"]] = Cause(row["id"], "", row["title"], row["code"], 0, row["confirm"], row["rule_out"],
                                 row["decide"], row["source_title"], row["source_url"], row.get("fix", ""),
                                 row.get("fixed", ""))
    return found


def _listed_under(cause: Cause, symptom: str, prior: int) -> Cause:
    """``dataclasses.replace(cause, symptom=symptom, prior=prior)``, without its per-field work."""
    return Cause(cause.id, symptom, cause.title, cause.code, prior, cause.confirm, cause.rule_out, cause.decide,
                 cause.source_title, cause.source_url, cause.fix, cause.fixed)


@functools.cache
def _tables() -> tuple[dict[str, Symptom], dict[str, Cause]]:
    described = _causes_by_id()
    table: dict[str, Symptom] = {}
    first: dict[str, Cause] = {}
    for number, row in enumerate(_read("symptoms.csv"), start=2):
        for column in ("id", "title", "severity", "code", "causes"):
            if not row.get(column):
                raise ValueError(f"symptoms.csv line {number}: {column} is empty")
        if row["severity"] not in _SEVERITIES:
            raise ValueError(f"symptoms.csv line {number}: bad severity {row['severity']!r}")
        if row["id"] in table:
            raise ValueError(f"symptoms.csv: symptom {row['id']!r} appears twice")
        listed: list[Cause] = []
        for rank, cause_id in enumerate((c.strip() for c in row["causes"].split(";") if c.strip()), start=1):
            if cause_id not in described:
                raise ValueError(f"symptoms.csv line {number}: unknown cause {cause_id!r}")
            if any(c.id == cause_id for c in listed):
                raise ValueError(f"symptoms.csv line {number}: cause {cause_id!r} listed twice")
            listed.append(_listed_under(described[cause_id], row["id"], rank))
            first.setdefault(cause_id, listed[-1])
        if row.get("check_shows") not in ("yes", "no"):
            raise ValueError(f"symptoms.csv line {number}: check_shows must be yes or no")
        table[row["id"]] = Symptom(row["id"], row["title"], row["severity"], row["code"], tuple(listed),
                                   row["check_shows"] == "yes")
    unused = sorted(set(described) - set(first))
    if unused:
        raise ValueError(f"causes.csv: causes no symptom lists: {unused}")
    return table, first


@functools.cache
def _exclusions() -> dict[str, tuple[Exclusion, ...]]:
    from gpuhealth.knowledge.signatures import signatures  # the catalogue is only read when a rule is asked for

    known = {sig.id: sig for sig in signatures()}
    described = _tables()[1]
    found: dict[str, list[Exclusion]] = {}
    for number, row in enumerate(_read("rules_out.csv"), start=2):
        for column in ("signature", "cause", "why", "source_title", "source_url"):
            if not row.get(column):
                raise ValueError(f"rules_out.csv line {number}: {column} is empty")
        sig = known.get(row["signature"])
        if sig is None:
            raise ValueError(f"rules_out.csv line {number}: unknown signature {row['signature']!r}")
        if row["cause"] not in described:
            raise ValueError(f"rules_out.csv line {number}: unknown cause {row['cause']!r}")
        if row["cause"] not in {c.id for c in _tables()[0][sig.symptom].causes}:
            raise ValueError(f"rules_out.csv line {number}: {row['cause']!r} is not a cause of {sig.symptom!r}, the "
                             f"symptom of {sig.id}")
        if row["cause"] == sig.cause:
            raise ValueError(f"rules_out.csv line {number}: {sig.id} confirms {sig.cause}, it cannot rule it out")
        listed = found.setdefault(sig.id, [])
        if any(e.cause == row["cause"] for e in listed):
            raise ValueError(f"rules_out.csv line {number}: {sig.id} rules out {row['cause']!r} twice")
        listed.append(Exclusion(sig.id, row["cause"], row["why"], row["source_title"], row["source_url"]))
    return {key: tuple(value) for key, value in found.items()}


@functools.cache
def _state_exclusions() -> tuple[StateExclusion, ...]:
    table, described = _tables()
    found: list[StateExclusion] = []
    for number, row in enumerate(_read("states_rule_out.csv"), start=2):
        for column in ("state", "causes", "why", "source_title", "source_url"):
            if not row.get(column):
                raise ValueError(f"states_rule_out.csv line {number}: {column} is empty")
        listed = tuple(c.strip() for c in row["causes"].split(";") if c.strip())
        not_for = frozenset(s.strip() for s in row.get("not_for", "").split(";") if s.strip())
        contradicts = frozenset(s.strip() for s in row.get("contradicts", "").split(";") if s.strip())
        for cause_id in listed:
            if cause_id not in described:
                raise ValueError(f"states_rule_out.csv line {number}: unknown cause {cause_id!r}")
        for symptom_id in not_for | contradicts:
            if symptom_id not in table:
                raise ValueError(f"states_rule_out.csv line {number}: unknown symptom {symptom_id!r}")
        found.append(StateExclusion(row["state"], listed, row["why"], not_for, contradicts, row["source_title"],
                                    row["source_url"]))
    return tuple(found)
