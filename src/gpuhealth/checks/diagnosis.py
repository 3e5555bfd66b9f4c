"""From messages and symptoms to causes: the catalogue's lines become findings, and each symptom present is
either folded under the cause the evidence confirms or leads with a ranked differential.

The checks stay the one place that judges snapshot fields. This step runs after them (the engine calls
:func:`diagnose`) and reads two things the checks do not: the lines of pasted evidence that the
signature catalogue matched (``snapshot.messages``, from ``analyze``), and the symptom -> causes table
(``knowledge/causes.py``). A cause is CONFIRMED when its check produced a finding or a line names it,
RULED OUT when its check ran clean or a line excludes it (``knowledge/rules_out.csv``: "Found no NVIDIA driver"
is only printed by a CUDA build of PyTorch) or a state another program's output shows rules it out
(``knowledge/states_rule_out.csv``, ``checks/machine_state.py``: lsmod listing nvidia rules out a module that was not
built), OPEN when its check was skipped for lack of evidence. A cause that
the evidence confirms stays confirmed even when another line would exclude it: the line that names it is the
stronger evidence. A confirmed cause's severity follows one rule, :func:`cause_severity`: its own, raised to its
symptom's only when the evidence observes the symptom (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from gpuhealth.checks.registry import (
    MAX_LINE_EVIDENCE,
    REGISTRY,
    CheckSpec,
    Draft,
    Expectations,
    Skip,
    check,
    line_evidence,
    table_fixes,
)
from gpuhealth.knowledge.causes import Cause, Exclusion, Symptom, exclusions, symptoms
from gpuhealth.knowledge.signatures import Signature
from gpuhealth.knowledge.signatures import signature as catalogue_row
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import (
    Candidate,
    Evidence,
    Finding,
    Fix,
    MessageLine,
    NvswitchPlatform,
    Severity,
    Skipped,
    Snapshot,
)

SEVERITY = {"info": Severity.INFO, "warning": Severity.WARNING, "critical": Severity.CRITICAL}
CONFIRMED, OPEN, RULED_OUT = "confirmed", "open", "ruled out"
CONFIRMS_LABEL = "confirms"  # a finding's label naming the cause (a causes.csv id) its evidence shows
DECIDED_BY = "decided by the evidence: "  # a finding's "decided" label names this cause (a +cpu torch version)
EXPLAINED_BY = "follows from "  # the cause's check did not fire, but a finding that explains its code did
SUGGESTED_BY = "suggested by the line: "  # a mined line whose family only suggests the cause (mined_causes.py)
RULED_OUT_BY = " (ruled out by the line: "  # a line's exclusion: "<the rule's reason> (ruled out by the line: <line>)"
SHOWN_BY = " (ruled out by "  # a state's exclusion: "<the row's reason> (ruled out by <tool>: <what it showed>)"
PASTE_INSTEAD = (
    "nvidia-smi", "sudo dmesg -T | grep -iE 'nvrm|xid|nvidia'", "lspci -nnk -d 10de:",
    "lsmod | grep -E 'nvidia|nouveau'", "dkms status", "mokutil --sb-state", "uname -r",
)


# --------------------------------------------------------------------------- GH003 / GH004 / GH901

@check("GH003", "unknown-error-lines", "Error lines gpuhealth does not know", requires=("messages",))
def unknown_error_lines(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    Lines of the evidence given to `gpuhealth analyze` that look like an error ("error", "failed",
    "fatal", "cannot", "unable", "refused", "denied" ...) but that no row of the signature catalogue
    (`knowledge/signatures.csv`) and no parser explains.

    Why it matters:
    gpuhealth cannot say what they mean, so it must not call the evidence healthy: the line may be
    the whole problem. They are shown so that a person reads them.

    How to fix:
    Read the lines; search for the exact message. If it concerns the GPU stack, paste the command that
    printed it together with `nvidia-smi`, `sudo dmesg | grep -iE 'nvrm|xid'` and `lspci -nnk -d 10de:`,
    or run `gpuhealth check` on the host.

    Exceptions:
    Errors of unrelated programs in the same paste. Lines that say nothing failed ("0 errors") are not
    counted, nor are a person's sentences about an error (parsers/prose.persons_line): one that introduces
    a paste ("errors like the following are produced:", "Evidence:"), a list item of the reporter's ("-
    Operating system: Ubuntu 24.04 (same error on 22.04)") or one in which the person speaks ("we traced
    the failure to the hardware"). They are named as words not read (GH002), so a paste of them alone is
    NO DIAGNOSIS, never HEALTHY. A line that opens as a program's does (a level, a program's name and its
    level, a timestamp, an exception's name, the driver's prefix) counts whatever it says, and so does a
    sentence that carries a program's message: after a colon ("my trainer stops with: FATAL: ..."), in
    quotes or backticks, an error code ("error 12"), a constant (CUDA_ERROR_UNKNOWN) or an exception's name.
    """
    unknown = [m for m in snapshot.messages or () if m.signature is None and m.symptom is None and not m.mined
               and not m.reported]  # a person's sentence about an error is words not read (GH002), not a line
    if unknown:  # lines the container toolkit's or the installer's source names are GH310's
        from gpuhealth.checks.tool_messages import explained

        known = explained(snapshot)
        unknown = [m for m in unknown if m.line not in known]
    if not unknown:
        return
    yield Draft(Severity.WARNING, f"{len(unknown)} error line(s) gpuhealth does not know: "
                f"{unknown[0].line[:100]}{' ...' if len(unknown) > 1 else ''}", evidence=line_evidence(unknown))


@check("GH004", "no-diagnosis", "Nothing in the evidence given was understood", reads=("messages",))
def no_diagnosis(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `gpuhealth analyze` recognised no piece of the evidence it was given: no known command output or
    file, no line of the signature catalogue, no command whose output tells something. The verdict is
    then NO DIAGNOSIS and the exit code 3 (gpuhealth could not answer), never HEALTHY.

    Why it matters:
    A report without findings would otherwise read as "healthy" when nothing was checked at all.

    How to fix:
    Paste the raw output of the commands listed in the finding (as a terminal session with the
    prompts, or one file per command), or run `gpuhealth snapshot -o bundle.tar.gz` on the host and
    `gpuhealth check --from bundle.tar.gz`.

    Exceptions:
    None. `gpuhealth check` on a host always reads something, so this is only raised by `analyze`.
    """
    # the container a program ran in is context for other evidence (CUDA's 803/804), no answer about the host by itself
    if snapshot.origin != "evidence" or set(snapshot.sources) - {"container_lines"}:
        return
    if any(m.signature or m.symptom or m.mined for m in snapshot.messages or ()):
        return
    from gpuhealth.checks.tool_messages import explained

    if explained(snapshot):  # lines the container toolkit's or the installer's source names (GH310)
        return
    unread = snapshot.unrecognized_files or ("(no text)",)
    yield Draft(Severity.INFO, "NO DIAGNOSIS: gpuhealth could not read " + ", ".join(unread[:3])
                + (f" and {len(unread) - 3} more" if len(unread) > 3 else "")
                + "; paste the output of the commands below, or run `gpuhealth snapshot` on the host",
                evidence=(Evidence("not recognised", tuple(unread[:MAX_LINE_EVIDENCE])),), explains=("GH002",),
                fixes=tuple(Fix(c, "any", note="paste its output") for c in PASTE_INSTEAD))


@check("GH901", "symptom-undiagnosed", "A symptom whose cause the evidence does not decide")
def symptom_undiagnosed(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A symptom shown by the evidence (for example "the desktop does not start after a driver install")
    that has no check of its own, and whose cause the evidence does not confirm. The finding lists the
    candidate causes ranked by the evidence (`knowledge/causes.csv`) and the commands that tell them
    apart. Symptoms with their own check (driver unreachable GH203, module refuses to load GH201,
    PyTorch sees no GPU GH605 ...) carry the same differential under their own code.

    A symptom told only in the reporter's own words ("nvidia-smi takes forever", "the GPU memory stays
    occupied after the program ends": `knowledge/symptom_phrases.csv`) is at most a warning, and its
    evidence says it is the reporter's words. Without a check of its own it is reported under the check
    of its likeliest cause, marked "not confirmed", with the commands that tell the causes apart. Where
    the symptom is a state the machine output given shows (memory held, nouveau loaded) and its own
    check read that output and found nothing, the machine output wins and the words raise nothing.

    Why it matters:
    The symptom is real; guessing its cause wastes a reinstall. The command that decides is cheaper.

    How to fix:
    Run the commands listed under "paste these next" and analyze their output together with what
    was given before.

    Exceptions:
    None. This finding is produced from the symptom table, never by a snapshot field alone.
    """
    return iter(())


# --------------------------------------------------------------------------- the step after the checks

def signature(signature_id: str) -> Signature:
    """The catalogue row of a line, or the stand-in row of a mined line whose family confirms its cause
    (checks/mined_causes.py): the diagnosis reads both alike."""
    from gpuhealth.checks.mined_causes import is_mined, signature_of

    return signature_of(signature_id) if is_mined(signature_id) else catalogue_row(signature_id)


def diagnose(findings: Sequence[Finding], skipped: Sequence[Skipped], ran: set[str],
             snapshot: Snapshot) -> list[Finding]:
    """Findings with catalogue lines turned into findings and every symptom resolved; re-ordered so a
    root cause sorts before what it explains."""
    result = list(findings)
    fired = {f.code for f in result}
    # checks that read the catalogue's lines themselves judged them: a line they let pass is overruled
    messages = [m for m in snapshot.messages or () if (m.signature or m.symptom) and not (
        m.signature and judges_lines(code := signature(m.signature).code) and code in ran and code not in fired
        and code not in {s.code for s in skipped})]
    from gpuhealth.checks.mined_causes import CONFIRMS, mined_lines

    mined = mined_lines(snapshot)
    # a mined line whose family confirms its cause is read as the catalogue line naming it; no check read it (the
    # checks see snapshot.messages), so none overrules it. One whose family only suggests its cause ranks it.
    confirming = [line for line in mined if line.decides == CONFIRMS]
    messages += [line.as_message() for line in confirming]
    suggested = {line.cause: line for line in mined if line.decides != CONFIRMS}
    from gpuhealth.checks.machine_state import held_states

    held = held_states(snapshot)  # what the programs' output shows the machine to be (checks/machine_state.py)
    messages = _words_yield(messages, held)
    made = {f.code for f in result}
    skipped_reason = {s.code: s.reason for s in skipped}
    result = _signature_findings(result, messages, ran, skipped_reason)
    if any(f.code == "GH506" for f in result):  # the tool the words name signs with its own key: its route
        from gpuhealth.checks.install import told_builder_route

        result = told_builder_route(result, snapshot)
    made = {f.code for f in result} - made  # codes whose finding only the catalogue's lines raised
    result = _mined_explains(result, confirming)
    table = symptoms()
    shown = {m.symptom for m in messages if shows_symptom(m) and not m.reported}
    told = {m.symptom for m in messages if m.reported} - shown  # shown only in the reporter's own words
    present = _present_symptoms(result, messages, table, _raised_by_causes(made, messages))
    platform, off_fabric = None, None
    if CUDA_INIT_SYMPTOMS.intersection(present):
        from gpuhealth.parsers.platform import nvswitch_platform, off_nvswitch

        platform = nvswitch_platform(snapshot)  # an NVSwitch system puts Fabric Manager first (rank)
        off_fabric = off_nvswitch(snapshot) if platform is None else None  # GPUs of no NVSwitch board rule it out
    for symptom_id in present:
        symptom = table[symptom_id]
        if any(symptom.code in f.explains for f in result):
            continue  # a check already named the cause of this symptom's finding
        if symptom_id in told:
            if _machine_says_otherwise(symptom, result, ran, skipped_reason):
                continue
            result = _resolve(result, as_told(symptom), messages, ran, skipped_reason, made, True, suggested,
                              told=True, held=held, platform=platform, off_fabric=off_fabric)
            continue
        result = _resolve(result, symptom, messages, ran, skipped_reason, made, symptom_id in shown, suggested,
                          held=held, platform=platform, off_fabric=off_fabric)
    return _ordered(_fix_confirmed(_fold_mined(result, confirming), messages))


# --------------------------------------------------------------------------- symptoms in the reporter's words

TOLD = " (the reporter's words)"  # added to the source of a reported line in a finding's evidence
# a finding's label: the reporter says a fix of its cause worked (parsers/prose_symptoms.py, knowledge/fix_phrases.csv)
FIX_CONFIRMED = "confirmed_by"
FIX_WORKED = " (a fix of this cause that the reporter says worked)"  # before TOLD in such a line's evidence source


def _fix_confirmed(findings: list[Finding], messages: Sequence[MessageLine]) -> list[Finding]:
    """The findings of a cause a fix the reporter says worked confirms ("blacklisting nouveau fixed it"): labelled
    (``FIX_CONFIRMED``) so that they lead over causes merely named at the same severity (:func:`_ordered`), their
    evidence saying whose fix it was. Still the reporter's words, below critical as the rest of them."""
    from gpuhealth.knowledge.symptom_phrases import fix_confirmed

    fixed = [m for m in messages if m.signature and fix_confirmed(m.signature)]
    if not fixed:
        return findings
    causes_of: dict[str, str] = {}  # code -> the cause (causes.csv id) the reporter's fix confirms
    for m in fixed:
        causes_of.setdefault(signature(m.signature).code, signature(m.signature).cause)
    lines = {m.line.strip() for m in fixed}
    out = []
    for finding in findings:
        if finding.code not in causes_of or finding.severity is Severity.INFO:
            out.append(finding)
            continue
        evidence = tuple(replace(e, source=e.source.removesuffix(TOLD) + FIX_WORKED + TOLD)
                         if any(line.strip() in lines for line in e.lines) and FIX_WORKED not in e.source else e
                         for e in finding.evidence)
        labelled = replace(finding, evidence=evidence, labels={**finding.labels, FIX_CONFIRMED: "the reporter's fix"})
        out.append(_as_fixed(labelled, causes_of[finding.code]))
    return out


# what a fix-confirmed cause's finding shows instead of its fix: the fix is done, per the reporter (never a to-do), and
# the cause's deciding commands, read-only, show whether it held
ALREADY_APPLIED = "the fix is already applied, per the reporter (it worked): nothing to do; this shows whether it held"
HELD = "shows whether the fix held"


def _as_fixed(finding: Finding, cause_id: str) -> Finding:
    """A cause the reporter's fix confirms, told as what it is. Where only the reporter's words show it, the message is
    the cause in the past tense (causes.csv ``fixed``: "the nouveau driver owned the GPU"), not the check's present
    tense ("nouveau is loaded"); where machine output shows it too, that output's message stays (it says what the
    machine printed). Either way the fix is no to-do: the fixes are the cause's own deciding commands (causes.csv
    ``decide``, read-only), the first saying that the fix is applied per the reporter, each that it shows whether the
    fix held."""
    from gpuhealth.knowledge.causes import causes

    confirmed = causes().get(cause_id)
    if confirmed is None:
        return finding
    message = finding.message
    if confirmed.fixed and all(e.source.endswith(TOLD) for e in finding.evidence):
        message = f"{confirmed.fixed}: the cause the reporter's fix confirms (fixed, per the reporter)"
    commands = [part.strip() for part in confirmed.decide.split(";") if part.strip()]
    return replace(finding, message=message, fixes=tuple(
        Fix(command, "any", note=ALREADY_APPLIED if i == 0 else HELD) for i, command in enumerate(commands)))


def as_told(symptom: Symptom) -> Symptom:
    """The symptom as the reporter's words show it: at most a warning. Nobody saw the machine say it, and a critical
    finding may drain a node (SESSION rule: a finding resting only on reported facts stays below critical)."""
    return replace(symptom, severity="warning") if symptom.severity == "critical" else symptom


def _words_yield(messages: list[MessageLine], held: dict[str, str]) -> list[MessageLine]:
    """The lines without those of a person's words whose symptom a program's output in the same evidence contradicts
    ("the nvidia module is not loaded" beside a pasted /proc/driver/nvidia/version: knowledge/states_rule_out.csv
    ``contradicts``): the machine output wins, and words alone raise nothing against it."""
    from gpuhealth.checks.machine_state import contradicted

    if not held:
        return messages
    return [m for m in messages if not (m.reported and m.symptom and contradicted(m.symptom, held))]


def _machine_says_otherwise(symptom: Symptom, findings: Sequence[Finding], ran: set[str],
                            skipped: dict[str, str]) -> bool:
    """The symptom is a state a snapshot shows (memory held, nouveau loaded: knowledge/symptom_phrases.csv
    ``machine_wins``), its own check read the machine output given and found nothing: the machine output wins over
    the reporter's words."""
    from gpuhealth.knowledge.symptom_phrases import state_symptoms

    return (symptom.id in state_symptoms() and symptom.code in ran and symptom.code not in skipped
            and not any(f.code == symptom.code for f in findings))


def evidence_of(lines: Sequence[MessageLine]) -> tuple[Evidence, ...]:
    """``line_evidence``, with the source of each reported line saying that it is the reporter's words."""
    return line_evidence(replace(m, source=m.source + TOLD) if m.reported else m for m in lines)


def _lead_by_report(findings: list[Finding], symptom: Symptom, top: Candidate, ranked: Sequence[Candidate],
                    lines: Sequence[MessageLine], ran: set[str], severity: Severity,
                    fixes: tuple[Fix, ...]) -> list[Finding] | None:
    """A symptom without a check of its own (GH901), told only in the reporter's words, leads under the check of its
    likeliest cause, unconfirmed: "nvidia-smi takes seconds; most likely persistence mode is off" is GH604's page and
    fixes, with the commands that tell the causes apart. None when that check did not run or already has a finding."""
    spec = REGISTRY.get(top.code)
    if spec is None or top.code not in ran or any(f.code == top.code for f in findings):
        return None
    head = f"{symptom.title}{TOLD}; most likely {top.title} (not confirmed)"
    findings.append(replace(_finding(spec, severity, head, evidence_of(lines)), differential=tuple(ranked),
                            fixes=fixes, labels={"reported": "words"}))
    return findings


def _mined_lead(findings: Sequence[Finding], line) -> int | None:
    """The index of the finding a confirming mined line's cause leads with: its check's, unless only informational."""
    return next((i for i, f in enumerate(findings) if f.code == line.code and f.severity is not Severity.INFO), None)


def _mined_explains(findings: list[Finding], confirming: Sequence) -> list[Finding]:
    """A confirming mined line's cause finding explains what its family explains (the installer's nouveau line explains
    GH201's module not loaded), as the mined check's own finding would have: the symptoms fold under the cause."""
    for line in confirming:
        index = _mined_lead(findings, line)
        if index is not None:
            lead = findings[index]
            extra = tuple(c for c in line.explains if c not in lead.explains and c != lead.code)
            findings[index] = replace(lead, explains=lead.explains + extra)
    return findings


def _fold_mined(findings: list[Finding], confirming: Sequence) -> list[Finding]:
    """The cause a confirming mined line named leads: its finding carries the mined rows and their source in its
    labels (and, with no differential of its own, the cause as confirmed by the line), and the mined check's finding
    for the same lines folds under it as information, so one fault is not two criticals."""
    from gpuhealth.knowledge.causes import causes

    known = causes()
    by_lead: dict[int, list] = {}
    for line in confirming:
        index = _mined_lead(findings, line)
        if index is not None:
            by_lead.setdefault(index, []).append(line)
    for index, lines in by_lead.items():
        rows = {line.row for line in lines}
        checks = {line.check for line in lines}
        folded = [i for i, f in enumerate(findings) if i != index and f.code in checks
                  and rows & set(f.labels.get("mined", "").split())]
        lead = findings[index]
        worst = max([lead.severity, *(findings[i].severity for i in folded)], key=lambda s: s.rank)
        for i in folded:
            findings[i] = replace(_at_severity(findings[i], Severity.INFO), explains=(), fixes=())
        # the lead explains a mined check's code only when every finding under that code is one it folds
        whole = tuple(c for c in sorted(checks) if c not in lead.explains and all(
            i in folded or f.severity is Severity.INFO for i, f in enumerate(findings) if f.code == c))
        first = lines[0]
        labels = {**lead.labels, "mined": " ".join(dict.fromkeys(line.row for line in lines)),
                  "mined_by": " ".join(sorted(checks)),
                  "mined_source": "; ".join(dict.fromkeys(line.source for line in lines)),
                  **({"mined_family": first.family} if first.family else {})}
        differential = lead.differential
        cause = known.get(first.cause)
        if not differential and cause is not None:
            differential = (Candidate(cause.id, cause.title, cause.code, CONFIRMED,
                                      f"the line: {first.message.line[:140]} ({first.reporter}, {first.source})",
                                      cause.decide),)
        findings[index] = replace(_at_severity(lead, worst), explains=lead.explains + whole, labels=labels,
                                  differential=differential)
    return findings


def judges_lines(code: str) -> bool:
    """Whether the check ``code`` reads ``snapshot.messages`` (declares ``requires`` or ``reads`` it) and so
    judges the catalogue's lines filed under its code itself."""
    spec = REGISTRY.get(code)
    return spec is not None and "messages" in spec.requires + spec.reads


def _judged(message: MessageLine) -> bool:
    """A check saw the line in a parsed piece. A kernel log holds every program's messages, so only a check
    that requires or reads ``kernel_log`` judged its lines (GH301 grades an application Xid; a DKMS or X
    server line in it is nobody's); a piece of one program (an installer log) was judged by its readers."""
    if not message.read_into or not message.signature:
        return False
    if "kernel_log" not in message.read_into:
        return True
    spec = REGISTRY.get(signature(message.signature).code)
    return spec is not None and "kernel_log" in spec.requires + spec.reads


def shows_symptom(message: MessageLine) -> bool:
    """Whether the line itself shows its symptom, so that the symptom's severity applies (the severity rule,
    docs/architecture.md): a line that reports the symptom ("CUDA available: False", a refused `modprobe`), not
    one that names a cause from which the table only infers it ("MIG mode is in pending disable state" does not
    show that a program failed). A line that does both is filed under its cause with its own severity in the
    catalogue. A line its own check judged (an Xid in a parsed kernel log) confirms causes but shows nothing."""
    if _judged(message):
        return False
    return not (message.signature and signature(message.signature).cause)


def _signature_findings(findings: list[Finding], messages: list[MessageLine], ran: set[str],
                        skipped: dict[str, str]) -> list[Finding]:
    """One finding per check code the catalogue's lines point at, unless that check judged the same lines.

    A check that produced a finding keeps its message; the lines are added as evidence. A check that does not read
    the lines judged without them, so the finding takes their severity when it is graver (GH601's "runs through
    minor version compatibility" is information, until a program's "driver version is insufficient" shows it fail).
    Lines of a parsed piece (a kernel log, an installer log) were read by the checks, which judged them
    (an application Xid is not a hardware fault): they raise nothing here. Lines the checks never read
    (a pasted error, a terminal session) raise a finding under their code.
    """
    groups: dict[str, list[tuple[Signature, MessageLine]]] = {}
    for message in messages:
        if message.signature and not _judged(message):
            sig = signature(message.signature)
            groups.setdefault(sig.code, []).append((sig, message))
    for code, matched in groups.items():
        spec = REGISTRY.get(code)
        if spec is None or code not in ran:
            continue
        index = next((i for i, f in enumerate(findings) if f.code == code), None)
        if index is not None:
            current = findings[index]
            # the check may have numbered the same lines ("12: <line>", GH806): one line is shown once
            known = {_unnumbered(line).strip() for e in current.evidence for line in e.lines}
            fresh = line_evidence(m for _, m in matched if m.line.strip() not in known)
            updated = replace(current, evidence=current.evidence + fresh)
            if not judges_lines(code):  # the check judged without these lines: a failure they show is not info
                lines_severity = max((SEVERITY[s.severity] for s, _ in matched), key=lambda s: s.rank)
                if lines_severity is Severity.CRITICAL and all(m.reported for _, m in matched):
                    lines_severity = Severity.WARNING  # the reporter's words raise a finding no higher than a warning
                updated = _at_severity(updated, max(current.severity, lines_severity, key=lambda s: s.rank))
            elif current.labels.get("reported") == "words" and current.severity is Severity.WARNING:
                # the check's finding rests on the reporter's words (held at a warning), but a program's own lines
                # under its code are critical (GH603 on a cuda-compat the words name, beside CUDA's error 804): the
                # machine output wins, as it would without the words
                machine = [s for s, m in matched if not m.reported]
                if any(SEVERITY[s.severity] is Severity.CRITICAL for s in machine):
                    updated = _at_severity(updated, Severity.CRITICAL)
            findings[index] = updated
            continue
        if code not in skipped and _machine_overrules(matched):
            continue  # the cause's check read the machine output given and found nothing: it wins over the words
        severity = max((SEVERITY[s.severity] for s, _ in matched), key=lambda s: s.rank)
        told = all(m.reported for _, m in matched)  # only rows that read a person's words: reported, below critical
        if told and severity is Severity.CRITICAL:
            severity = Severity.WARNING
        made = _finding(spec, severity, matched[0][0].summary, evidence_of(m for _, m in matched))
        if told:
            made = replace(made, labels={**made.labels, "reported": "words"})
        # lines the catalogue calls informational ("not a fault": a kernel tainted by an unsigned module with Secure
        # Boot off) have nothing to fix; the check's fixes would read as if they had
        fixes = _row_fixes(matched) or made.fixes  # a row that decodes one error has its own fixes (GH802:<row>)
        if code == "GH606":  # the lines name the GPU's compute capability: the wheel whose arch list has it
            from gpuhealth.checks.cuda import arch_wheel_fixes, capabilities_named

            fixes = arch_wheel_fixes(capabilities_named(m.line for _, m in matched))
        fixes = fits_evidence(fixes, [m for _, m in matched]) if severity is not Severity.INFO else ()
        findings.append(replace(made, fixes=fixes))
    return _explainers_of_machine_lines(findings, groups)


def _explainers_of_machine_lines(findings: list[Finding],
                                 groups: dict[str, list[tuple[Signature, MessageLine]]]) -> list[Finding]:
    """A finding held at a warning because it rests on the reporter's words, which explains a finding that a
    program's own critical line raised (GH603 on a cuda-compat package the words name, explaining GH601's CUDA error
    804): the machine output shows the failure and the words only say which cause, so it is as grave as that line,
    as it is when the line sits under its own code."""
    critical = {code for code, matched in groups.items()
                if any(SEVERITY[s.severity] is Severity.CRITICAL and not m.reported for s, m in matched)}
    return [_at_severity(f, Severity.CRITICAL) if f.labels.get("reported") == "words"
            and f.severity is Severity.WARNING and critical.intersection(f.explains) else f for f in findings]


def _machine_overrules(matched: Sequence[tuple[Signature, MessageLine]]) -> bool:
    """Whether every line is a cause named in the reporter's words (knowledge/cause_phrases.csv) whose family lets the
    cause's check overrule the words (``machine_wins``: the gcc versions compared, the headers looked for). The caller
    asks only when that check ran, was not skipped and found nothing."""
    from gpuhealth.knowledge.symptom_phrases import TOLD_PREFIX, state_causes

    return all(m.reported and (m.signature or "").startswith(TOLD_PREFIX) for _, m in matched) and all(
        sig.cause in state_causes() for sig, _ in matched)


def _row_fixes(matched: Sequence[tuple[Signature, MessageLine]]) -> tuple[Fix, ...]:
    """The fixes knowledge/fixes.csv keys to one of the matched catalogue rows (``<code>:<row id>``), or to the cause
    one names (``<code>:<cause id>``): the fixes of the one error the row decodes (containerd's missing nvidia runtime
    is fixed in containerd's configuration, not Docker's), in place of the check's general ones; empty when no row
    has its own."""
    from gpuhealth.knowledge.fixes import fixes_of

    # a cause's own fixes (``<code>:<cause id>``) serve every row naming it, a person's words among them (a suspend
    # that left nvidia_uvm unusable is fixed by reloading it, not by GH205's modprobe of a module that is loaded)
    return next((found for sig, _ in matched if (found := fixes_of(f"{sig.code}:{sig.id}"))
                 or (sig.cause and (found := fixes_of(f"{sig.code}:{sig.cause}")))), ())


def _unnumbered(line: str) -> str:
    """An evidence line without the line number a check put before it (``12: text`` -> ``text``)."""
    number, colon, rest = line.partition(": ")
    return rest if colon and number.strip().isdigit() else line


def _finding(spec: CheckSpec, severity: Severity, message: str, evidence: tuple[Evidence, ...]) -> Finding:
    from gpuhealth.knowledge.actions import of_check

    action, impact = of_check(spec.code, severity.value)
    return Finding(code=spec.code, slug=spec.slug, severity=severity, message=message, evidence=evidence,
                   explanation=spec.explanation, fixes=documented_fixes(spec), action=action, impact=impact)


def documented_fixes(spec: CheckSpec) -> tuple[Fix, ...]:
    """The fixes a check declares as data (knowledge/fixes.csv), for findings made from a catalogue line alone:
    commands that run as is, or steps and file edits marked as such, each disruptive one flagged."""
    from gpuhealth.knowledge.fixes import fixes_of  # read on first use: most runs raise no line finding

    return fixes_of(spec.code)


# Causes that restate a symptom rather than explain one: "the NVIDIA kernel module is not loaded" (a line such as
# "Failed to open /dev/nvidiactl: No such device") is GH201's symptom itself, whose differential asks why (Secure Boot,
# no module built, nouveau ...); its lines show that symptom like any symptom line
_RESTATES_SYMPTOM = frozenset({"driver-not-loaded"})


def _raised_by_causes(made: set[str], messages: Sequence[MessageLine]) -> set[str]:
    """The codes whose finding only lines naming a cause raised ("Module nvidia not found", a person's "the module was
    not built for this kernel"): that finding is the cause's, and shows no symptom that shares its code (GH507's
    "the driver could not be built or installed" is not what such a line says). A cause that restates a symptom
    (``_RESTATES_SYMPTOM``) names no explanation: its lines leave the symptom standing."""
    lines: dict[str, list[bool]] = {}
    for m in messages:
        if m.signature:
            sig = signature(m.signature)
            lines.setdefault(sig.code, []).append(bool(sig.cause) and sig.cause not in _RESTATES_SYMPTOM)
    return {code for code in made if lines.get(code) and all(lines[code])}


def _present_symptoms(findings: list[Finding], messages: list[MessageLine], table: dict[str, Symptom],
                      caused: set[str] = frozenset()) -> list[str]:
    """Symptom ids shown by a line or a command, or by a check whose code only one symptom uses (and whose finding
    alone shows it: ``check_shows``), unless only lines naming a cause raised that finding (``caused``)."""
    # a line the catalogue calls informational ("nothing to do") shows no symptom
    present = [m.symptom for m in messages if m.symptom in table
               and not (m.signature and signature(m.signature).severity == "info")]
    by_code: dict[str, list[Symptom]] = {}
    for symptom in table.values():
        if symptom.check_shows:  # a symptom only lines show (cuda-init-unknown under GH610) leaves the check's own
            by_code.setdefault(symptom.code, []).append(symptom)
    for finding in findings:
        ids = by_code.get(finding.code, [])
        if len(ids) == 1 and finding.severity is not Severity.INFO and finding.code not in caused:
            present.append(ids[0].id)
    present = list(dict.fromkeys(p for p in present if p))
    # a narrower symptom shown beside its broader one (cuInit's unknown error beside JAX's "No GPU/TPU found") is the
    # one finding's differential: the broader one's order of causes would undo it
    return [p for p in present if NARROWED_BY.get(p) not in present]


# broader symptom -> the narrower symptom of the same check whose differential replaces it where both are shown
NARROWED_BY = {"framework-no-gpu": "cuda-init-unknown"}


def _resolve(findings: list[Finding], symptom: Symptom, messages: list[MessageLine], ran: set[str],
             skipped: dict[str, str], made: set[str], shown: bool, suggested: dict | None = None,
             told: bool = False, held: dict[str, str] | None = None,
             platform: NvswitchPlatform | None = None, off_fabric: str | None = None) -> list[Finding]:
    """``shown``: a line or command showed the symptom itself (:func:`shows_symptom`); otherwise a check's
    finding under the symptom's code did, or a line naming one of its causes let the table infer it. ``told``: only
    the reporter's words show it (``symptom`` is then :func:`as_told`'s). ``held``: the states the programs' output
    shows (checks/machine_state.py), which rule causes out. ``platform``: the NVSwitch system the evidence names."""
    from gpuhealth.checks.machine_state import ruled_out

    ranked = rank(symptom, findings, messages, ran, skipped, suggested, ruled_out(symptom.id, held or {}), platform,
                  off_fabric)
    severity = observed_severity(symptom, findings, shown)
    confirmed = [c for c in ranked if c.status == CONFIRMED]
    if confirmed and confirmed[0].why.startswith(DECIDED_BY):
        return _closed(findings, symptom, ranked, made)
    if confirmed and confirmed[0].why.startswith(EXPLAINED_BY):
        return _fold_under_explainer(findings, symptom, confirmed[0], shown)
    if confirmed:
        return _lead_with_cause(findings, symptom, confirmed[0], messages, ran, made, shown)
    left = narrowed_to_one_check(symptom, ranked)
    if left is not None:
        return _lead_by_elimination(findings, symptom, left, ranked, messages, ran, made, shown)
    lines = [m for m in messages if m.symptom == symptom.id]
    if platform is not None and symptom.id in CUDA_INIT_SYMPTOMS:
        findings = _lead_on_platform(findings, symptom, ranked, lines, platform, severity, told, ran)
    index = next((i for i, f in enumerate(findings) if f.code == symptom.code), None)
    top = next((c for c in ranked if c.status != RULED_OUT), None)
    head = f"{symptom.title}; most likely {top.title}" if top else symptom.title
    fixes = _leading_fixes(symptom, ranked, lines)
    if index is None and any(symptom.code in f.explains and f.code == FABRIC_CODE for f in findings):
        return findings  # the platform's cause leads with the symptom's lines (_lead_on_platform): no second finding
    if index is None:
        code = symptom.code if symptom.code in REGISTRY else "GH901"
        if told and code == "GH901" and top is not None:
            led = _lead_by_report(findings, symptom, top, ranked, lines, ran, severity, fixes)
            if led is not None:
                return led
        if code not in ran:
            return findings
        spec = REGISTRY[code]
        head = f"{symptom.title}{TOLD}; most likely {top.title}" if told and top else head
        findings.append(replace(_finding(spec, severity, head, evidence_of(lines)), differential=tuple(ranked),
                                fixes=fixes, labels={"reported": "words"} if told else {}))
        return findings
    current = findings[index]
    # a finding only the lines raised takes the likeliest cause's fixes; a check's own finding keeps the fixes it chose
    made_by_lines = current.code in made
    findings[index] = replace(_at_severity(current, max(current.severity, severity, key=lambda s: s.rank)),
                              message=head if made_by_lines else current.message, differential=tuple(ranked),
                              fixes=fixes if made_by_lines else current.fixes)
    return findings


def _at_severity(finding: Finding, severity: Severity) -> Finding:
    """``finding`` raised to ``severity``; an action and impact it took from its check's row follow the row of the new
    severity (GH901's critical row drains, its warning row does not); ones its check set stay."""
    if severity is finding.severity:
        return finding
    from gpuhealth.knowledge.actions import of_check

    action, impact = finding.action, finding.impact
    if (action, impact) == of_check(finding.code, finding.severity.value):
        action, impact = of_check(finding.code, severity.value)
    return replace(finding, severity=severity, action=action, impact=impact)


def _leading_fixes(symptom: Symptom, ranked: Sequence[Candidate], lines: Sequence[MessageLine]) -> tuple[Fix, ...]:
    """The fixes of a symptom whose cause is open.

    When the evidence put the likeliest cause in front (:func:`led_by_evidence`: it ruled out a cause the prior ranks
    above it, or every other cause), its fixes follow it: the fixes of the check that would confirm it, when that is
    another check (GH201's `sudo modprobe nvidia` for "the module is not loaded"), and otherwise the command that
    decides, a step that is right whatever the cause (the symptom's own check lists fixes for all its causes at once,
    `modprobe nvidia_uvm` beside a CPU-only wheel). When it leads by its prior alone, a cause's whole procedure (the
    MOK signing loop and its reboot for "Failed to open /dev/nvidiactl") is a guess: the fixes are then the commands
    that decide between the open causes, none of them disruptive."""
    top = next((c for c in ranked if c.status != RULED_OUT), None)
    if top is None:
        return ()
    if not led_by_evidence(symptom, ranked):
        return _deciding_fixes(ranked, lines)
    spec = REGISTRY.get(top.code)
    fixes = fits_evidence(documented_fixes(spec), lines) if spec is not None and top.code != symptom.code else ()
    if fixes:
        from gpuhealth.fixsections import in_script_order  # the condition goes on the first fix a report shows

        fixes = in_script_order(fixes)
        return (replace(fixes[0], note="; ".join(x for x in (f"if {top.title}", fixes[0].note) if x)), *fixes[1:])
    steps = fits_evidence([Fix(c, "any") for c in split_commands(top.command)], lines)[:2]
    return tuple(replace(f, note="tells the likeliest cause apart") if i == 0 else f for i, f in enumerate(steps))


def led_by_evidence(symptom: Symptom, ranked: Sequence[Candidate]) -> bool:
    """Whether the leading open cause leads because of the evidence, not only by its prior: the evidence ruled out
    every other cause, or a cause the prior ranks above it (a PyTorch "Found no NVIDIA driver" rules out a CPU-only
    build and a too-new CUDA, and the module not loaded moves up from third). A confirmed cause leads by evidence."""
    top = next((c for c in ranked if c.status != RULED_OUT), None)
    if top is None:
        return False
    if top.status == CONFIRMED or not any(c.status == OPEN for c in ranked if c is not top):
        return True
    prior = {cause.id: cause.prior for cause in symptom.causes}
    return any(c.status == RULED_OUT and prior.get(c.cause, 0) < prior.get(top.cause, 0) for c in ranked)


MAX_DECIDING_CAUSES = 3  # the open causes whose commands a prior-only lead shows as its fixes, likeliest first
MAX_DECIDING_FIXES = 5


def _deciding_fixes(ranked: Sequence[Candidate], lines: Sequence[MessageLine]) -> tuple[Fix, ...]:
    """The commands that tell the likeliest open causes apart (what "paste these next" lists), each cause's first
    one noting the cause it decides; a disruptive command is never one of them."""
    out: list[Fix] = []
    seen: set[str] = set()
    for candidate in [c for c in ranked if c.status == OPEN][:MAX_DECIDING_CAUSES]:
        first = True
        for fix in fits_evidence([Fix(c, "any") for c in split_commands(candidate.command)], lines):
            if fix.disruptive or _plain(fix.command) in seen:
                continue
            seen.add(_plain(fix.command))
            out.append(replace(fix, note=f"decides: {candidate.title}") if first else fix)
            first = False
    return tuple(out[:MAX_DECIDING_FIXES])


def _shown_text(lines: Sequence[MessageLine]) -> str:
    """The lines and their catalogue rows' domains ("pytorch", "jax"), lower-cased: what names a framework."""
    return " ".join([m.line for m in lines] + [signature(m.signature).domain for m in lines if m.signature]).lower()


# A fix that installs or changes a framework names it; it is offered only when the evidence shows that framework.
_FRAMEWORKS = ("jax", "tensorflow", "cupy", "torch")


def fits_evidence(fixes: Sequence[Fix], lines: Sequence[MessageLine]) -> tuple[Fix, ...]:
    """``fixes`` without those for a framework that neither the lines nor their catalogue rows' domains name: a
    pasted CUDA error with no framework in sight gets no `pip install 'jax[cuda12]'`."""
    shown = _shown_text(lines)

    def fits(fix: Fix) -> bool:
        named = [name for name in _FRAMEWORKS if name in fix.command.lower()]
        return not named or any(name in shown for name in named)
    return tuple(f for f in fixes if fits(f))


def _fix_of_cause(findings: list[Finding], symptom: Symptom, cause: Candidate, made: set[str]) -> list[Finding]:
    """A line confirmed a cause that shares its check with the symptom ("Torch not compiled with CUDA enabled"
    under GH605): a finding only the lines raised takes that cause's own fix, not the check's fixes for all its
    causes."""
    fix = next((c.fix for c in symptom.causes if c.id == cause.cause), "")
    index = next((i for i, f in enumerate(findings) if f.code == symptom.code), None)
    if fix and index is not None and symptom.code in made:
        findings[index] = replace(findings[index], fixes=(Fix(fix, "any"),))
    return findings


def _closed(findings: list[Finding], symptom: Symptom, ranked: Sequence[Candidate], made: set[str]) -> list[Finding]:
    """A fact in the evidence decided the cause (the finding's ``decided`` label): the differential is closed. The
    symptom's finding keeps the decided cause, confirmed, and what the evidence ruled out; the causes left open are
    not asked about (their commands would not change the answer), and the decided cause's own fix leads."""
    closed = tuple(c for c in ranked if c.status != OPEN)
    findings = _fix_of_cause(findings, symptom, closed[0], made)
    return [replace(f, differential=closed) if f.code == symptom.code else f for f in findings]


def _fold_under_explainer(findings: list[Finding], symptom: Symptom, cause: Candidate, shown: bool) -> list[Finding]:
    """The cause's check did not run or was skipped, but a finding that explains that check's code fired (GH507, no
    nvidia module for the running kernel, explains GH201's "module not loaded"): the symptom is that finding's too, in
    whatever order the checks ran."""
    root = next((f for f in findings if cause.code in f.explains and f.code != symptom.code
                 and f.severity is not Severity.INFO), None)
    if root is None or any(f.code == symptom.code and root.code in f.explains for f in findings):
        return findings  # no explainer, or the symptom's finding explains it already: no loop
    out = []
    for f in findings:
        if f is root:
            explains = f.explains + ((symptom.code,) if symptom.code not in f.explains else ())
            f = replace(_at_severity(f, cause_severity(f.severity, symptom, findings, shown)), explains=explains)
        out.append(f)
    return out


def _lead_with_cause(findings: list[Finding], symptom: Symptom, cause: Candidate, messages: list[MessageLine],
                     ran: set[str], made: set[str], shown: bool) -> list[Finding]:
    """The confirmed cause leads and explains the symptom's finding, at the severity :func:`cause_severity` gives."""
    if cause.code == symptom.code:
        return _fix_of_cause(findings, symptom, cause, made)
    if any(f.code == symptom.code and cause.code in f.explains for f in findings):
        # the symptom's own check judged that finding its evidence, not its cause (GH102 for a GPU refused beside
        # working siblings explains GH305's probe lines): folding it the other way round would make a loop
        return findings
    index = next((i for i, f in enumerate(findings) if f.code == cause.code), None)
    if index is None:
        spec = REGISTRY.get(cause.code)
        if spec is None or cause.code not in ran:
            return findings
        lines = [m for m in messages if m.signature and signature(m.signature).cause == cause.cause]
        own = max((SEVERITY[signature(m.signature).severity] for m in lines if m.signature), default=Severity.INFO,
                  key=lambda s: s.rank)
        # no line names it: the finding whose evidence shows the cause's state (CONFIRMS_LABEL) is the evidence
        state = () if lines else next((f.evidence for f in findings if f.labels.get(CONFIRMS_LABEL) == cause.cause), ())
        findings.append(_finding(spec, own, cause.title, line_evidence(lines) or state))
        index = len(findings) - 1
    current = findings[index]
    explains = current.explains + ((symptom.code,) if symptom.code not in current.explains else ())
    findings[index] = replace(_at_severity(current, cause_severity(current.severity, symptom, findings, shown)),
                              explains=explains)
    return findings


def narrowed_to_one_check(symptom: Symptom, ranked: Sequence[Candidate]) -> Candidate | None:
    """The likeliest open cause when the evidence ruled out every cause of any other check: the causes left open all
    belong to one check (a forward-compat or a stale libcuda, both GH603's, once a working nvidia-smi has ruled out the
    driver upgraded without a reload, GH202). That check then leads, though which of its causes is still open; None
    when a cause is confirmed, when nothing was ruled out, or when the open causes belong to several checks."""
    if any(c.status == CONFIRMED for c in ranked) or not any(c.status == RULED_OUT for c in ranked):
        return None
    still = [c for c in ranked if c.status == OPEN]
    if not still or len({c.code for c in still}) != 1 or still[0].code == symptom.code:
        return None
    return still[0]


def _lead_by_elimination(findings: list[Finding], symptom: Symptom, left: Candidate, ranked: Sequence[Candidate],
                         messages: list[MessageLine], ran: set[str], made: set[str], shown: bool) -> list[Finding]:
    """The one check left leads (:func:`narrowed_to_one_check`) and explains the symptom, with the differential that
    says which causes were ruled out and which of its own are open; its message names the likeliest, in words."""
    had = any(f.code == left.code for f in findings)
    findings = _lead_with_cause(findings, symptom, left, messages, ran, made, shown)
    index = next((i for i, f in enumerate(findings) if f.code == left.code), None)
    if index is None:
        return findings
    current = findings[index]
    others = [c.title for c in ranked if c.status == OPEN and c is not left]
    # a symptom only the reporter's words tell: the finding made here quotes them and says whose words they are
    lines = [m for m in messages if m.symptom == symptom.id]
    told = not had and bool(lines) and all(m.reported for m in lines)
    message = current.message if had else (f"{symptom.title}{TOLD if told else ''}; most likely {left.title}"
                                           + (f"; else {others[0]}" if others else ""))
    extra = {"evidence": current.evidence or evidence_of(lines), "labels": {**current.labels, "reported": "words"}}
    findings[index] = replace(current, message=message, differential=tuple(ranked), **(extra if told else {}))
    return findings


def observed_severity(symptom: Symptom, findings: Sequence[Finding], shown: bool) -> Severity:
    """How grave the evidence shows the symptom to be: the symptom's severity in the table when a line or command
    showed it (:func:`shows_symptom`), and the severity of any finding under the symptom's own code (a check
    judged it: a critical GH203 "nvidia-smi cannot talk to the driver"). INFO when it is only inferred."""
    seen = [f.severity for f in findings if f.code == symptom.code]
    if shown:
        seen.append(SEVERITY[symptom.severity])
    return max(seen, default=Severity.INFO, key=lambda s: s.rank)


def cause_severity(own: Severity, symptom: Symptom, findings: Sequence[Finding], shown: bool) -> Severity:
    """THE severity rule for a confirmed cause (docs/architecture.md, "Severity of a diagnosed cause"): the greater
    of the cause's own severity (its check's judgement, or its catalogue line's row) and the symptom's severity as
    the evidence OBSERVES it. A symptom the table only infers from the cause adds nothing: a pasted "MIG mode is in
    pending disable state" is the warning its row says, and it is critical only beside a line showing that a
    program failed to use the GPU. A symptom observed makes even a check's milder finding as grave as what it
    explains, so a critical symptom is never folded under a warning."""
    return max(own, observed_severity(symptom, findings, shown), key=lambda s: s.rank)


def rank(symptom: Symptom, findings: Sequence[Finding], messages: Sequence[MessageLine], ran: set[str],
         skipped: dict[str, str], suggested: dict | None = None, states: dict | None = None,
         platform: NvswitchPlatform | None = None, off_fabric: str | None = None) -> list[Candidate]:
    """The symptom's causes, each confirmed / open / ruled out, confirmed first, then open by prior.

    ``states``: cause id -> (the row of knowledge/states_rule_out.csv, what showed its state): a cause the evidence
    does not confirm, that a state a program's output shows rules out (the nvidia module loaded, for "the module was
    not built"), is ruled out with the row's reason and source, as a line's exclusion is.

    ``suggested``: cause id -> a mined line whose family only suggests that cause (checks/mined_causes.py). An open
    cause it names ranks first among the open ones, saying so; a cause the symptom does not list joins the
    differential, open, when the line's family explains the symptom's check.

    ``platform``: the NVSwitch system the evidence names (parsers/platform.py). CUDA does not start there until
    Fabric Manager has set the NVSwitches up, so for a symptom of CUDA failing to initialise (CUDA_INIT_SYMPTOMS)
    Fabric Manager not running joins the differential if the symptom does not list it, and ranks first among the
    open causes that nothing else puts first. It stays a candidate: the platform decides nothing. ``off_fabric``: what
    shows the GPUs are no NVSwitch board's (parsers/platform.py, off_nvswitch): the cause is ruled out there."""
    suggested = suggested or {}
    states = states or {}
    fired = {f.code: f for f in findings if f.severity is not Severity.INFO}
    named = {signature(m.signature).cause: m for m in messages if m.signature and signature(m.signature).cause
             and (not _judged(m) or signature(m.signature).code in skipped)}
    decided = {f.labels["decided"]: f for f in findings if f.labels.get("decided")}
    from gpuhealth.knowledge.symptom_phrases import fix_confirmed

    # a named cause the reporter's fix confirms ranks before one merely named
    fixed = {signature(m.signature).cause for m in messages if m.signature and fix_confirmed(m.signature)}
    # a finding whose evidence shows a cause's state (GH207's listing without /dev/nvidia-uvm: CUDA's unified-memory
    # node is absent) confirms that cause of a symptom beside it, as a line naming it does
    shows = {f.labels[CONFIRMS_LABEL]: f for f in findings if f.labels.get(CONFIRMS_LABEL)
             and f.severity is not Severity.INFO}
    explainers = {code: f for f in fired.values() for code in f.explains if code not in fired}
    excluded = _excluded(messages)
    shown_by = [m for m in messages if m.symptom == symptom.id]
    out: list[tuple[int, int, int, Candidate]] = []
    for cause in symptom.causes:
        status, why = _status(cause, symptom, fired, named, ran, skipped)
        if cause.id in decided:
            status, why = CONFIRMED, f"{DECIDED_BY}{_fact(decided[cause.id])}"
        elif status != CONFIRMED and cause.id in shows:
            status, why = CONFIRMED, f"{shows[cause.id].code}: {shows[cause.id].message[:140]}"
        elif status != CONFIRMED and cause.code != symptom.code and cause.code in explainers:
            root = explainers[cause.code]
            status, why = CONFIRMED, f"{EXPLAINED_BY}{root.code}: {root.message[:140]}"
        source = None
        if status != CONFIRMED and cause.id in excluded:
            rule, line = excluded[cause.id]
            status, why = RULED_OUT, f"{rule.why}{RULED_OUT_BY}{line.line.strip()[:100]})"
            source = f"{rule.source_title} <{rule.source_url}>"
        elif status == OPEN and cause.id in states:
            row, shown = states[cause.id]
            status, why = RULED_OUT, f"{row.why}{SHOWN_BY}{shown[:140]})"
            source = f"{row.source_title} <{row.source_url}>"
        if status == OPEN and cause.id in suggested:
            status, why = OPEN, f"{SUGGESTED_BY}{suggested[cause.id].message.line.strip()[:140]}"
        order = {CONFIRMED: 0, OPEN: 1, RULED_OUT: 2}[status]
        # among confirmed causes, a line naming it beats a critical finding, which beats a warning (a fix the reporter
        # says worked beats a line naming it); among open ones a mined line suggesting it puts it first
        strength = (10 if cause.id in decided else 9.5 if cause.id in fixed else
                    9 if cause.id in named or cause.id in shows else
                    fired[cause.code].severity.rank if status == CONFIRMED and cause.code in fired else
                    1 if status == CONFIRMED or cause.id in suggested else 0)
        prior = cause.prior
        if status == OPEN and platform is not None and cause.id == FABRIC_CAUSE and symptom.id in CUDA_INIT_SYMPTOMS:
            prior, why = 0, _on_platform(platform, why)
        elif status == OPEN and off_fabric and cause.id == FABRIC_CAUSE and symptom.id in CUDA_INIT_SYMPTOMS:
            status, why = RULED_OUT, f"Fabric Manager is needed only on NVSwitch systems{SHOWN_BY}{off_fabric})"
            source = f"{cause.source_title} <{cause.source_url}>"
        order = {CONFIRMED: 0, OPEN: 1, RULED_OUT: 2}[status]  # the platform may have ruled it out
        out.append((order, -strength, prior,
                    Candidate(cause.id, cause.title, cause.code, status, why, _decide(cause, shown_by), source)))
    listed = {cause.id for cause in symptom.causes}
    if platform is not None and symptom.id in CUDA_INIT_SYMPTOMS and FABRIC_CAUSE not in listed:
        out.append(_fabric_candidate(platform, fired, ran, skipped))
    if any(line.cause not in listed and symptom.code in line.explains for line in suggested.values()):
        from gpuhealth.knowledge.causes import causes

        known = causes()
        for cause_id, line in suggested.items():
            if cause_id not in listed and symptom.code in line.explains and cause_id in known:
                extra = known[cause_id]
                out.append((1, -1, 0, Candidate(extra.id, extra.title, extra.code, OPEN,
                                                f"{SUGGESTED_BY}{line.message.line.strip()[:140]}", extra.decide)))
    out.sort(key=lambda item: item[:3])
    return [item[3] for item in out]


# --------------------------------------------------------------------------- the platform ranks Fabric Manager

FABRIC_CAUSE = "fabric-manager-failed"
# symptoms of CUDA failing to initialise or count GPUs (cudaGetDeviceCount, torch.cuda.is_available() False); not
# cuInit's unknown error (cuda-init-unknown): Fabric Manager not running makes CUDA return "system not ready" (802).
# Also a job failing to start on all the GPUs together while one GPU works (told): on an NVSwitch system they reach
# each other only through the fabric Fabric Manager sets up
CUDA_INIT_SYMPTOMS = frozenset({"framework-no-gpu", "torch-no-gpu", "multi-gpu-start-fails"})
FABRIC_CODE = "GH210"
# the check's own consequences (checks/evidence_checks.py GH210): what Fabric Manager down explains
_FABRIC_EXPLAINS = ("GH610", "GH605", "GH408", "GH806")


def _lead_on_platform(findings: list[Finding], symptom: Symptom, ranked: Sequence[Candidate],
                      lines: Sequence[MessageLine], platform: NvswitchPlatform, severity: Severity,
                      told: bool, ran: set[str]) -> list[Finding]:
    """CUDA fails to initialise (cudaGetDeviceCount, "no CUDA-capable device", PyTorch seeing no GPU) on an NVSwitch
    system, and the evidence neither confirms a cause nor rules out Fabric Manager: the platform ranked Fabric Manager
    first (:func:`rank`), and it leads under its own check, GH210, unconfirmed, with the two looks that decide it (the
    NVIDIA Fabric Manager User Guide: CUDA does not start on an NVSwitch system until Fabric Manager has set the fabric
    up). It explains the symptom's finding, if one was made. A lead resting on words (the platform or the symptom told
    by the reporter) stays a warning. Only a symptom a line shows (a program's, or the reporter's words) leads so: one
    only inferred (information) makes no lead, nor one only a check saw (a live host's framework probe: a CPU-only
    jaxlib, a framework that fails to import), whose finding already says why."""
    top = next((c for c in ranked if c.status != RULED_OUT), None)
    spec = REGISTRY.get(FABRIC_CODE)
    if (not lines or top is None or top.cause != FABRIC_CAUSE or top.status != OPEN or spec is None
            or FABRIC_CODE not in ran or severity is Severity.INFO or any(f.code == FABRIC_CODE for f in findings)):
        return findings
    from gpuhealth.checks.evidence_checks import DECIDE_802
    from gpuhealth.inert import one_line

    words = told or platform.reported or all(m.reported for m in lines)
    if words and severity is Severity.CRITICAL:
        severity = Severity.WARNING
    said = ", the reporter's words" if platform.reported else ""
    head = (f"{symptom.title}{TOLD if told else ''} on {platform.name} ({one_line(platform.shown)[:80]}{said}); most "
            "likely Fabric Manager is not running or not of the driver's version (not confirmed): CUDA does not start "
            "on an NVSwitch system until Fabric Manager has set the fabric up")
    shown = Evidence(platform.source + (TOLD if platform.reported else ""), (one_line(platform.shown)[:200],))
    finding = replace(_finding(spec, severity, head, evidence_of(lines) + (shown,)), differential=tuple(ranked),
                      fixes=DECIDE_802 + _installed_fabric_manager() + table_fixes(FABRIC_CODE),
                      explains=(symptom.code, *(c for c in _FABRIC_EXPLAINS if c != symptom.code)),
                      labels={"reported": "words"} if words else {})
    return [*findings, finding]


def _installed_fabric_manager() -> tuple[Fix, ...]:
    """The looks that show the installed Fabric Manager's version, to hold against the driver's (`cat
    /sys/module/nvidia/version`, among GH210's fixes): the version-mismatch row's package listings."""
    return tuple(f for f in table_fixes(FABRIC_CODE, kind="fm-driver-interface-mismatch")
                 if f.command.startswith(("dpkg -l", "rpm -qa")))


def _on_platform(platform: NvswitchPlatform, why: str) -> str:
    """A candidate's reason, said of the NVSwitch platform that ranks it first."""
    said = "the reporter's words" if platform.reported else platform.source
    return (f"{platform.shown} ({said}) names {platform.name}, an NVSwitch system: CUDA does not start there until "
            f"Fabric Manager has set the NVSwitches up; {why.split('; ', 1)[-1]}")


def _fabric_candidate(platform: NvswitchPlatform, fired: dict[str, Finding], ran: set[str],
                      skipped: dict[str, str]) -> tuple:
    """Fabric Manager not running, added to a CUDA-initialisation symptom whose causes do not list it: open, first
    among the open causes (prior 0); confirmed when its check (GH210) fired, ruled out when it ran and found nothing."""
    from gpuhealth.knowledge.causes import causes

    cause = causes()[FABRIC_CAUSE]
    if cause.code in fired:
        return (0, -fired[cause.code].severity.rank, 0, Candidate(
            cause.id, cause.title, cause.code, CONFIRMED, f"{cause.code}: {fired[cause.code].message[:140]}",
            cause.decide))
    if cause.code in ran and cause.code not in skipped:
        why = f"{cause.code} found nothing wrong in the evidence given"
        return (2, 0, 0, Candidate(cause.id, cause.title, cause.code, RULED_OUT, why, cause.decide))
    why = _on_platform(platform, f"not checked: {skipped[cause.code][:120]}" if cause.code in skipped
                       else "nothing in the evidence decides it")
    return (1, 0, 0, Candidate(cause.id, cause.title, cause.code, OPEN, why, cause.decide))


def _fact(finding: Finding) -> str:
    """The deciding fact as the evidence shows it (its first evidence line), else the finding's message."""
    shown = next((line for e in finding.evidence for line in e.lines), None)
    return (shown or finding.message)[:140]


def _decide(cause: Cause, lines: Sequence[MessageLine]) -> str:
    """The cause's deciding commands without those for another framework than the one the symptom's lines show (a
    JAX paste is not asked for `torch.version.cuda`; "" when every command is for another framework). All of them
    when the lines name no framework (a bare CUDA error may come from any) or no line showed the symptom."""
    shown = _shown_text(lines)
    if not any(name in shown for name in _FRAMEWORKS):
        return cause.decide
    kept = fits_evidence([Fix(c, "any") for c in split_commands(cause.decide)], lines)
    return "; ".join(f.command for f in kept)


def _excluded(messages: Sequence[MessageLine]) -> dict[str, tuple[Exclusion, MessageLine]]:
    """Cause id -> the rule and the first line that rules it out (``knowledge/rules_out.csv``)."""
    table = exclusions()
    out: dict[str, tuple[Exclusion, MessageLine]] = {}
    for message in messages:
        if message.reported:  # the rules reason from a program having printed the line ("nvidia-smi printed it");
            continue  # the reporter's words, or a linked thread's title, show no program printing anything
        for rule in table.get(message.signature or "", ()):
            out.setdefault(rule.cause, (rule, message))
    return out


def _status(cause: Cause, symptom: Symptom, fired: dict[str, Finding], named: dict[str, MessageLine],
            ran: set[str], skipped: dict[str, str]) -> tuple[str, str]:
    if cause.id in named:
        return CONFIRMED, f"the line: {named[cause.id].line[:140]}"
    if cause.code != symptom.code and cause.code in fired:
        return CONFIRMED, f"{cause.code}: {fired[cause.code].message[:140]}"
    if cause.code in skipped:
        return OPEN, f"usual cause #{cause.prior}; not checked: {skipped[cause.code][:120]}"
    if cause.code in ran and cause.code != symptom.code:
        return RULED_OUT, f"{cause.code} found nothing wrong in the evidence given"
    return OPEN, f"usual cause #{cause.prior}; nothing in the evidence decides it"


def _ordered(findings: list[Finding]) -> list[Finding]:
    """Most severe first; at equal severity a cause the reporter's fix confirms first, and a finding another explains
    after the one explaining it."""
    explained = {code for f in findings for code in f.explains}
    # lines nobody explains (GH003) and unrecognised files (GH002) never lead over a finding that says something
    catch_all = ("GH003", "GH002")
    # a start-up cost, not a fault (persistence off): another finding of the same severity says more about
    # what the user sees (the MIG devices a process enumerates, GH608)
    advisory = ("GH604",)
    # a cause the reporter's fix confirms leads over one merely named and over what it explains, at equal severity
    return sorted(findings, key=lambda f: (-f.severity.rank, FIX_CONFIRMED not in f.labels, f.code in catch_all,
                                           f.code in advisory, f.code in explained, f.code, str(f.subject)))


def next_commands(findings: Sequence[Finding], given: Sequence[str] = (), limit: int = 6) -> list[str]:
    """The commands whose output would decide the open differentials, likeliest cause first; commands
    whose output was already given are left out."""
    done = {_plain(c) for c in given}
    commands: list[str] = []
    for finding in findings:
        for candidate in finding.differential:
            if candidate.status != OPEN:
                continue
            for command in split_commands(candidate.command):
                if command not in commands and _plain(command) not in done and read_only(command):
                    commands.append(command)
    return commands[:limit]


def read_only(command: str) -> bool:
    """Whether a command only reads: "paste these next" asks for output that would change the answer, never for a
    change to the host (loading a module, installing, restarting, resetting)."""
    return not _CHANGES.search(command)


_CHANGES = lazy_re(  # a program that changes the host, where a command starts (not "/etc/modprobe.d" in a grep)
    r"(?:^|[;&|(]\s*|\bsudo\s+(?:-\S+\s+)*)(?:modprobe(?!\s+(?:-n|--dry-run|-c|--showconfig|-D|--show-depends)\b)"
    r"|insmod|nvidia-modprobe|update-initramfs|dracut|tee|dkms\s+(?:install|build|autoinstall|remove)"
    r"|mokutil\s+--(?:import|delete|disable-validation|enable-validation)|pip3?\s+install|ldconfig\s*$"
    r"|(?:apt-get|apt|dnf|yum|zypper)\s+(?:-\S+\s+)*(?:install|upgrade|reinstall)"
    r"|systemctl\s+(?:start|stop|restart|enable|disable|mask|daemon-reload)|sed\s+-i"
    r"|reboot|shutdown|poweroff|rmmod|nvidia-uninstall|pkill|killall|kill\s|(?:apt-get|apt|dnf|yum|zypper)\s+(?:-\S+\s+)*"
    r"(?:remove|purge|autoremove|erase)|nvidia-smi\s[^|;&]*?(?:-r|--gpu-reset|-pm|-mig|-pl|-ac|-e|-c)\b)\b|>\s*/")


def _plain(command: str) -> str:
    return " ".join(command.replace("sudo ", "").split())


def split_commands(text: str) -> list[str]:
    """``a; b "c; d"`` -> ``["a", 'b "c; d"']``: the table's commands are separated by ``; `` outside quotes."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == ";":
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]
