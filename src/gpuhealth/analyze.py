"""Loose evidence: recognise what each pasted or attached file is, and build one partial snapshot.

Container formats (``nvidia-bug-report.log``, nvidia_gpu_exporter capture files) are split into
their sections first; every piece is then sniffed on its own. A piece nobody recognises is named in
``Snapshot.unrecognized_files``, never a crash.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from gpuhealth.evidence import identify, route
from gpuhealth.evidence.facts import (
    VISIBILITY_FAILURES,
    VISIBILITY_VARIABLES,
    cuda_library_lines,
    device_request_lines,
    env_lines,
    facts_for,
    lockdown_lines,
    module_key_lines,
    p2p_lines,
    secure_boot_lines,
    signing_key_lines,
    visible_in_effect,
)
from gpuhealth.evidence.listings import PACKAGE_LISTINGS, embedded_rpm_packages
from gpuhealth.evidence.toolchain import kbuild_compiler_lines
from gpuhealth.knowledge.signatures import is_words_row, scan_lines
from gpuhealth.lazyre import guarded_re, has, lazy_re
from gpuhealth.model import DEVICE_NODES_NAMED, DEVICE_PLUGIN, KernelLog, MessageLine, ParseError, SmiReport, Snapshot
from gpuhealth.parsers.capture_bundle import split_capture_bundle
from gpuhealth.parsers.container_run import may_show_container
from gpuhealth.parsers.markdown import Part as MarkdownPart
from gpuhealth.parsers.markdown import is_fold_tag, split_markdown
from gpuhealth.parsers.session import Block, split_session, with_prompts
from gpuhealth.parsers.wrapped import unwrap_lines
from gpuhealth.records import record

__all__ = ["EvidenceError", "Piece", "Recognised", "analyze_texts", "decode_bytes", "identify", "split_pieces"]

MAX_DECOMPRESSED = 512 * 1024 * 1024  # a gzip bomb stops here
BUG_REPORT_RULE = lazy_re(r"^_{20,}\s*$", re.M)
# The richer an nvidia-smi format, the more the checks can say: keep the richest one given.
# a club-3090 rig report ranks with the table: each has fields the other lacks (default power limit and link
# widths; utilisation and temperatures), so whichever came first stays
SMI_RANK = {"xml": 5, "query": 4, "csv": 3, "table": 2, "rig-report": 2, "list": 1}


class EvidenceError(Exception):
    """A file that could not be read at all (missing, unreadable, corrupt gzip)."""


@record
class Piece:
    name: str  # file name, with the section inside it when split ("bug-report.log: dmesg")
    text: str


def decode_bytes(name: str, data: bytes) -> str:
    """Bytes of an evidence file as text, un-gzipped when it is gzip (bounded against bombs)."""
    if data[:2] == b"\x1f\x8b":
        import gzip  # only for gzipped evidence: not at start-up

        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
                data = handle.read(MAX_DECOMPRESSED + 1)
        except (OSError, EOFError) as exc:
            raise EvidenceError(f"{name}: corrupt gzip file ({exc})") from exc
        if len(data) > MAX_DECOMPRESSED:
            raise EvidenceError(f"{name}: decompresses to more than {MAX_DECOMPRESSED} bytes; refused")
    return data.decode("utf-8", errors="replace")


def split_pieces(name: str, text: str) -> list[Piece]:
    """A bug report or capture file becomes its sections; anything else stays one piece."""
    head = text[:4096]
    if "nvidia-bug-report" in head or "NVIDIA bug report log" in head:
        return [Piece(f"{name}: {title}", body) for title, body in split_bug_report(text)]
    if head.startswith("#" * 40):
        try:
            return [Piece(f"{name}: {command}", body) for command, body in split_capture_bundle(text).items()]
        except ParseError:
            pass
    return [Piece(name, text)]


def split_bug_report(text: str) -> list[tuple[str, str]]:
    """Sections of ``nvidia-bug-report.log``: a rule of underscores, a title line, then the output."""
    sections = []
    for block in BUG_REPORT_RULE.split(text):
        stripped = block.strip("\n")
        if not stripped.strip():
            continue
        title, _, body = stripped.partition("\n")
        sections.append((title.strip().lstrip("*").strip()[:120], body))
    return sections


@record
class Recognised:
    piece: str
    kind: str | None
    note: str = ""  # why a recognised piece could not be parsed


class _Reading:
    """What analyze has gathered so far, over every file and piece. (A plain class: a dataclass's generated methods are
    compiled as the module is imported, on every start-up.)"""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.log: list[Recognised] = []
        self.unrecognized: list[str] = []
        self.messages: list[MessageLine] = []
        self.unknown_seen: set[str] = set()
        self.commands: list[str] = []
        self.typed: list[tuple[str, str]] = []  # (command, the head of its output) of each session
        self.stated: list[Any] = []  # what people's sentences state (evidence/prose.py)
        # OS upgrades told in words (parsers/os_upgrade.py): evidence of the module not built only beside a failure
        self.upgrades: list[MessageLine] = []

    def overlay(self, found: dict[str, Any], source: str) -> None:
        for key, value in found.items():
            if _merge(self.fields, key, value):
                # a record every piece lays its fields over (torch from `pip list` and from a python session) came
                # from all of them: its evidence header names each, not only the last (a richer nvidia-smi replaces)
                combined = key in self.sources and dataclasses.is_dataclass(value) and not isinstance(value, SmiReport)
                if not combined:
                    self.sources[key] = source
                elif source not in self.sources[key].split(", "):
                    self.sources[key] = f"{self.sources[key]}, {source}"


def analyze_texts(named_texts: Iterable[tuple[str, str | KernelLog]]) -> tuple[Snapshot, list[Recognised]]:
    """Build one partial snapshot from evidence texts; also say what each piece was taken for.

    A bug report or capture file is split into its sections; a pasted terminal session into its
    (command, output) blocks, each routed by its command first, then by its content. Every piece's
    lines also go through the signature catalogue; error-looking lines nobody explains are kept too.
    """
    reading = _Reading()
    heads: list[str] = []  # each text's head: apt's or dnf's output there says the distribution (distro_infer)
    texts: list[tuple[str, str]] = []  # each text whole: the NVSwitch platform it names (parsers/platform.py)
    for name, text in named_texts:
        if isinstance(text, str):
            heads.append(text[:20_000])
            texts.append((name, text))
        if isinstance(text, KernelLog):  # a large input, already scanned as a stream (evidence_input.py)
            reading.overlay({"kernel_log": text}, name)
            reading.log.append(Recognised(name, "kernel-log", "scanned as a stream"))
            continue
        pieces = split_pieces(name, text)
        if len(pieces) > 1:
            for piece in pieces:  # a bug report has many sections we do not read; that is fine
                _read_piece(reading, piece, None, container=True, unknown_lines=False)
            continue
        parts = split_markdown(text)  # an issue body: its fenced blocks are evidence, the prose around them prose
        if parts is None or len(parts) == 1:
            missed = _read_text(reading, name, text if parts is None else _fenced_text(parts[0]))
            reading.unrecognized.extend(missed[:1])
        else:
            reading.unrecognized.extend(_read_markdown(reading, name, parts))
    if reading.typed:  # a driver or GPU a command names: sh NVIDIA-Linux-x86_64-510.47.03.run (GH209)
        from gpuhealth.parsers.gpu_mentions import COMMANDS_TYPED, command_mentions

        reading.overlay(command_mentions(reading.typed), COMMANDS_TYPED)
    if reading.upgrades or any(_MAY_SHOW_UPGRADE(text) for _, text in texts):
        # an upgrade told, or a package tool's line showing one install a kernel, names the module not built only
        # beside a failure it explains (parsers/os_upgrade.py)
        from gpuhealth.parsers.os_upgrade import kernel_install_lines, mentions_kernel_package, with_upgrade_cause

        for name, text in texts:
            if mentions_kernel_package(text):
                reading.upgrades.extend(kernel_install_lines(text.splitlines(), name))
        reading.messages = with_upgrade_cause(reading.messages, reading.upgrades, reading.fields.get("install"))
        kept = {m.source for m in reading.messages if m in reading.upgrades}  # their pieces were read after all
        reading.unrecognized = [name for name in reading.unrecognized  # "notes.txt", "notes.txt (a terminal session..."
                                if not any(name == k or name.startswith(f"{k} (") for k in kept)]
    fields = reading.fields
    from gpuhealth.evidence.prose import fill_reported  # the words fill only what no program's output gave

    reported = fill_reported(fields, reading.stated) if reading.stated else ()
    from gpuhealth.evidence.prose import fill_named_gpus  # GPU models and counts named in words (product lines)

    reported = (*reported, *fill_named_gpus(fields, texts))
    for fact in reported:
        reading.sources.setdefault(fact.field, f"{fact.source} (the reporter's words)")
    if any(r.kind == "lsmod" and not r.note for r in reading.log):
        fields.pop("kernel_module_filters", None)  # a whole module list was given: it says what is not loaded
    extra_unavailable = fields.pop("unavailable", {})
    inventory = "" if reading.messages else _setup_inventory_only(reading.log)  # a line read is more than setup
    if inventory:
        from gpuhealth.model import SETUP_INVENTORY_ONLY

        extra_unavailable = {**extra_unavailable, SETUP_INVENTORY_ONLY: inventory}
    snapshot = Snapshot(origin="evidence", sources=reading.sources, unrecognized_files=tuple(reading.unrecognized),
                        unavailable=_answered({**_unavailable(fields), **extra_unavailable}, reported),
                        messages=tuple(reading.messages), commands_given=tuple(dict.fromkeys(reading.commands)),
                        reported=reported, **fields)
    from gpuhealth.parsers.platform import platform_in_texts

    platform = platform_in_texts(texts)  # a system or instance type named anywhere, in a program's output or words
    if platform is None:
        from gpuhealth.parsers.platform import platform_of_named

        platform = platform_of_named(snapshot.gpus_named)  # "8x H100 SXM" in words: an HGX board (reported)
    if platform is not None:
        snapshot = dataclasses.replace(snapshot, platform=platform)
    from gpuhealth.distro_infer import with_inferred_family

    return with_inferred_family(snapshot, snapshot.commands_given, heads), reading.log


# Facts whose reading of an output is strict enough to prove that a flattened line holds that command's output
# (the kernel release alone, a variable's value alone); the others read any text.
_FLAT_FACTS = frozenset({"uname", "echo-variable"})


def printed_by(command: str, output: str) -> bool:
    """Whether ``output`` is what ``command`` prints, as far as the evidence registry can tell: a kind that reads
    the command's output recognises it, or a strict fact of the command reads it. A flattened session is split
    only where this holds (parsers/session.py)."""
    from gpuhealth.evidence.registry import normalise_command, ordered, sniff

    if not output.strip() or len(command) > 2000:
        return False
    normal = normalise_command(command)
    claimed = [k for k in ordered() if k.produced_by(normal)]
    if claimed and sniff(output, claimed) is not None:
        return True
    return any(name in _FLAT_FACTS for name, _ in facts_for(command, output))


def _read_text(reading: _Reading, name: str, text: str) -> list[str]:
    """Read one text (a pasted session is split into its blocks); what to name as not recognised if nothing was.
    Table rows and Xid lines a mail client or terminal wrapped are joined first (parsers/wrapped.py)."""
    text = unwrap_lines(text)
    blocks = split_session(text, printed_by)
    if len(blocks) == 1 and blocks[0].command is None:
        return [] if _read_piece(reading, Piece(name, text), None, container=False) else [name]
    reading.commands.extend(b.command for b in blocks if b.command and b.language == "shell")
    reading.typed.extend((b.command, b.output[:2000]) for b in blocks if b.command and b.language == "shell")
    env_before = dict(reading.fields.get("env") or {})
    understood = [_read_piece(reading, Piece(_block_name(name, block), block.output), block, container=True)
                  for block in blocks]
    _visibility_at_failure(reading, name, blocks, env_before)
    if not any(understood):
        return [f"{name} (a terminal session: none of its {len(blocks)} commands' output)"]
    # the session was only partly understood: a command's output nothing read may hold the fault (never HEALTHY on it)
    reading.unrecognized.extend(f"{_block_name(name, block)} (its output was not read)"
                                for block, read in zip(blocks, understood, strict=True)
                                if not read and block.output.strip() and not _NOT_INSTALLED.match(block.output))
    return []


# The shell's answer for a command that is not installed (bash's and dash's "not found", zsh's, Ubuntu's and Fedora's
# command-not-found handlers): the whole output, and understood: the command is not there, nothing else ran
_NOT_INSTALLED = lazy_re(r"\s{0,8}(?:(?:\S{1,200}: )?(?:line \d{1,9}: |\d{1,9}: )?[\w.+-]{1,100}: "
                         r"(?:command )?not found|"
                         r"zsh: command not found: [\w.+-]{1,100}|"
                         r"The program '[\w.+-]{1,100}' is currently not installed|"
                         r"Command '[\w.+-]{1,100}' not found, (?:but|did you mean))")


def _visibility_at_failure(reading: _Reading, name: str, blocks: list[Block], before: dict[str, str]) -> None:
    """CUDA_VISIBLE_DEVICES as the session's failing command saw it (the first whose output says the process sees no
    GPU, or not the one it asks for), not as the session's last command set it (GH608 judges the value): a later
    ``CUDA_VISIBLE_DEVICES=0 python x.py`` that works does not clear the ``=1`` the failure ran under."""
    failed = [m for m in reading.messages if m.signature in VISIBILITY_FAILURES]
    # two blocks may run the same command (one name): the failing one is the one whose output holds the line
    failing = next((i for i, block in enumerate(blocks) if any(
        m.source == _block_name(name, block) and m.line[:200] in block.output for m in failed)), None)
    if failing is None or "env" not in reading.fields:
        return
    effect = visible_in_effect([(b.command, b.output) for b in blocks], failing)
    env = dict(reading.fields["env"])
    # what text that no command printed sets before the failure (a Dockerfile's ENV pasted above `docker run` of its
    # image, an env file): it holds; a script a command showed (`cat train.py`) holds only where that script runs
    loose = {name for b in blocks[:failing + 1] if not (b.command or "").strip()
             for name in env_lines(b.output.splitlines()[:5000]).get("env", {})}
    for variable in VISIBILITY_VARIABLES:
        if variable in effect:
            value = effect[variable]
        elif env.get(variable) != before.get(variable) and variable not in loose:  # not in effect at the failure
            value = before.get(variable)
        else:
            continue
        env.pop(variable, None)
        if value is not None:
            env[variable] = value
    reading.fields["env"] = env


def _read_markdown(reading: _Reading, name: str, parts: list[MarkdownPart]) -> list[str]:
    """Read each part of a markdown text on its own; what to name as not read. A part in which nothing was understood
    is named even when other parts were: the evidence was then only partly understood, and what was not read may
    hold the fault, so the report is never HEALTHY on it (GH002). A folding tag's summary is a label, not evidence."""
    missed = [part for i, part in enumerate(parts)
              if _read_text(reading, _part_name(name, parts, i), _fenced_text(part))]
    if len(missed) == len(parts):
        return [f"{name} (markdown: none of its {len(parts)} parts)"]
    unread = []
    for part in missed:
        if is_fold_tag(part.text):
            continue
        lines = [line.strip() for line in part.text.splitlines() if line.strip()]
        what = "fenced block" if part.fenced else "prose"
        unread.append(f"{name}: {part.label} ({what}, {len(lines)} line(s), not read: {lines[0][:60]!r}"
                      f"{' ...' if len(lines) > 1 else ''})")
    return unread


# A file a post names on the line just above a fence ("contents of /etc/modprobe.d/blacklist.conf:"): the fence holds
# that file, and a reader that keeps file names (modprobe.d: evidence/listings.py) takes it from the fence's name.
_FILE_ABOVE = lazy_re(r"(?<![\w.~-])/(?:etc|usr|lib|lib64|run|var|opt|boot)(?:/[\w.@+-]{1,200}){1,12}")


def _part_name(name: str, parts: list[MarkdownPart], index: int) -> str:
    """A part's name; a fence's names the one file the last line of the prose right above it names."""
    part = parts[index]
    label = f"{name}: {part.label}"
    if not part.fenced or index == 0 or parts[index - 1].fenced:
        return label
    above = [line for line in parts[index - 1].text.splitlines()[-50:] if line.strip()]
    files = dict.fromkeys(_FILE_ABOVE.findall(above[-1][:1000])) if above else {}
    return f"{label} (the post names {next(iter(files))} above it)" if len(files) == 1 else label


def _fenced_text(part: MarkdownPart) -> str:
    """A fenced block's text, with a prompt put before each command line the registry proves by its output (a
    fence holds ``nvidia-smi`` and its table without the ``$``)."""
    return with_prompts(part.text, printed_by) if part.fenced else part.text


def _answered(unavailable: dict[str, str], reported: tuple[Any, ...]) -> dict[str, str]:
    """``unavailable`` without the parts a person's words answered ("the container toolkit is not installed")."""
    answered = {key for fact in reported if fact.field == "unavailable" for key in fact.attributes}
    return {key: why for key, why in unavailable.items() if key not in answered}


def _block_name(name: str, block: Block) -> str:
    if not block.command:
        return f"{name}: line {block.line}"
    prompt = ">>>" if block.language == "python" else "$"
    return f"{name}: {prompt} {block.command.splitlines()[0][:80]}"


def _read_piece(reading: _Reading, piece: Piece, block: Block | None, container: bool,
                unknown_lines: bool = True) -> bool:
    """Route, parse and scan one piece; True when anything in it was understood."""
    command = block.command if block is not None and block.language == "shell" else None
    text = _with_pip_header(command, _with_lspci_address(command, _with_csv_header(command, piece.text)))
    kind = route(command, text) if piece.text.strip() else None
    understood = parsed = False
    read_into: tuple[str, ...] = ()
    found: dict[str, Any] = {}
    was_read: ReadBy | None = None
    if kind is not None:
        try:
            raw = kind.parse(text, piece.name)
            was_read = _read_by(kind, text, piece.name, raw)
            found = _nodes_named(command, _one_gpu_selected(command, raw))
            reading.overlay(found, piece.name)
            read_into = () if kind.name == "app-log" else tuple(found)  # GH806 reads app logs by pattern
            reading.log.append(Recognised(piece.name, _setup_label(kind.name, found)))
            understood = parsed = True
            _prose_beside(reading, piece.name, kind.name, text, unknown_lines)
        except ParseError as exc:
            reading.log.append(Recognised(piece.name, kind.name, f"could not parse {kind.name}: {exc}"))
            if not container:
                reading.unrecognized.append(f"{piece.name} (looked like {kind.name}, but: {exc})")
    if block is not None and block.command:
        understood = _read_facts(reading, piece, block) or understood
    # a piece that did not parse as the listing it looked like is scanned like any other text
    scanned_as = kind.name if kind is not None and parsed else None
    before, messages_before = len(reading.log), len(reading.messages)
    matched = _scan_messages(reading, piece, scanned_as, read_into, unknown_lines,
                             was_read if scanned_as is not None else None)
    if scanned_as == "kernel-log" and unknown_lines and not _untimed(found):
        _words_between_records(reading, piece, block, reading.messages[messages_before:])
    if scanned_as == "kernel-log" and unknown_lines and _untimed(found):
        # text that only holds a kernel line or two (an issue body quoting an NVRM line beside an error and prose): the
        # lines the kernel log does not read are read like any pasted text, so their error is never dropped
        # (/proc/driver/nvidia/version's "NVRM version:" line is that file's, not the kernel log's: read as a banner)
        rest = [line for line in piece.text.splitlines()[:MAX_SCANNED_LINES]
                if not _kernel_record(line) or line.lstrip().startswith("NVRM version:")]
        words = [line for line in rest if any(char.isalpha() for char in line)]
        if words and not _read_run(reading, Piece(piece.name, "\n".join(rest)), block):
            # nothing in them was read: named, so that the report is never HEALTHY on them (GH002)
            reading.unrecognized.append(_not_read(piece.name, words, "beside the kernel log's lines"))
    # an Xid or a symptom named in words, or the device plugin's Xid lines
    understood = understood or any(r.kind in ("reported-xids", "device-plugin-xids", "reported symptom",
                                              VERSION_BANNERS, LINKED_TITLES) for r in reading.log[before:])
    if unknown_lines and (kind is None or kind.name == "app-log"):
        # a program's output naming the CUDA library files it uses (ldd, a loader error, a discovery file): GH602
        libraries = cuda_library_lines(piece.text.splitlines()[:MAX_SCANNED_LINES])
        reading.overlay(libraries, piece.name)
        if libraries and not understood and not matched:
            found = libraries["cuda"]
            reading.log.append(Recognised(piece.name, "cuda-library-files",
                                          f"{len(found.library_files)} CUDA library file(s)" if found.library_files
                                          else f"LD_LIBRARY_PATH: {len(found.ld_library_path)} directories"))
            understood = True
    if kind is None and (block is None or not block.command) and unknown_lines:  # a person's sentences
        understood = _read_words(reading, piece) or understood
    if kind is None and not understood:
        reading.log.append(Recognised(piece.name, "catalogued lines" if matched else None,
                                      f"{matched} line(s) in the signature catalogue" if matched else ""))
    return understood or matched > 0


def _read_words(reading: _Reading, piece: Piece) -> bool:
    """Versions, unit states and PCIe links a person's sentences state (reported facts, applied at the end)."""
    from gpuhealth.evidence.prose import statements

    found = statements(piece.text[:2_000_000], piece.name)
    if found:
        reading.stated.extend(found)
        reading.log.append(Recognised(piece.name, "reporter's words", f"{len(found)} fact(s) stated in words"))
    return _read_misspelt(reading, piece) or bool(found)


def _read_misspelt(reading: _Reading, piece: Piece) -> bool:
    """A person's line that matched nothing as typed, read again as the message it retypes: its misspelt words
    corrected (parsers/spelling.py: "unknow runtime specified", "the kernal module") and the catalogue's capitals not
    required (signatures.match_retyped: "nvidia-smi has failed because it couldn't communicate with the nvidia
    driver"); the catalogue, and for a corrected line the symptoms told and the facts stated in words too. What it
    yields is the reporter's words (below critical), its evidence the line as typed; the line is then no error line
    nobody knows."""
    from gpuhealth.evidence.prose import statements
    from gpuhealth.knowledge.signatures import Signature, match_line, match_retyped
    from gpuhealth.parsers.prose_symptoms import Told, told_symptoms
    from gpuhealth.parsers.spelling import corrected

    changed: list[tuple[str, str, Signature | None]] = []  # (typed, corrected, the row the corrected line matches)
    for line in piece.text.splitlines()[:MAX_SCANNED_LINES]:
        fixed = corrected(line) if line.strip() else line
        sig = match_retyped(fixed) if line.strip() else None
        if fixed != line or sig is not None:
            changed.append((line, fixed, sig))
    # the words readers run once over all corrected lines, and per line only where they read something
    respelt = [fixed for line, fixed, _ in changed if fixed != line]
    told: dict[str, list[Told]] = {}
    for found in told_symptoms("\n".join(respelt)):
        told.setdefault(respelt[found.line], []).append(found)
    stating = bool(respelt) and bool(statements("\n".join(respelt), piece.name))
    read: list[str] = []
    for line, fixed, sig in changed:
        stated = statements(fixed, piece.name) if stating and fixed != line else []
        symptoms = told.get(fixed, []) if fixed != line else []
        if sig is None and not stated and not symptoms:
            continue
        if match_line(line) or told_symptoms(line) or statements(line, piece.name):
            continue  # the line as typed was read: neither its spelling nor its case is in question
        shown = line.strip()[:500]
        messages = [] if sig is None else [MessageLine(shown, piece.name, sig.id, sig.symptom or None,
                                                       mined=_mined_behind(sig.id, fixed), reported=True)]
        messages += [told_message(found, shown, piece.name) for found in symptoms]
        reading.messages[:] = [m for m in reading.messages if not _unknown_line(m, shown, piece.name)]
        reading.messages.extend(messages)
        reading.stated.extend(replace(s, stated=replace(s.stated, words=shown)) for s in stated)
        read.append(shown)
    if read:
        reading.log.append(Recognised(piece.name, "reporter's words", f"{len(read)} line(s) read as the message they "
                                      f"retype ({read[0][:60]!r}{' ...' if len(read) > 1 else ''})"))
    return bool(read)


def _unknown_line(message: MessageLine, line: str, source: str) -> bool:
    """Whether ``message`` is ``line`` kept as an error line nobody knows."""
    return message.line == line and message.source == source and message.signature is None \
        and message.symptom is None and not message.mined


# Kinds that only inventory the setup (what is installed, which release, which tool versions): they tell the checks
# what to compare, and can show a mismatch, but nothing in them shows the GPUs working. Evidence of these alone
# never makes a report HEALTHY (GH005); a package listing with prose beside it is such a piece too (_prose_beside).
# A person's sentences (versions, unit states in words: evidence/prose.py) show no GPU working either, nor does the
# driver's version file (the module is loaded; whether it drives a GPU is not in it).
# An nvidia-smi table cut after its header row (`nvidia-smi | head -3`, a screenshot's first line) names the driver and
# the newest CUDA it supports, and no GPU: only the setup, like a version banner.
SMI_HEADER_ONLY = "smi-table header"
# (a program's text, "program-text", says how the job is set up: the GPUs it chooses, the wheel it pins, the image
# it builds on; nothing in it shows a GPU or the driver, so alone it is no healthy host either)
SETUP_KINDS = PACKAGE_LISTINGS | {"os-release", "uname", "kernel-version", "gcc-version", "nvcc-version",
                                  "proc-version", "reporter's words", "version banners", SMI_HEADER_ONLY,
                                  "program-text", "package-log",
                                  # the host's configuration: Secure Boot and its keys, a container runtime's (as a
                                  # file or as its daemon reports it), a pod's, the GPUs a node advertises to the
                                  # scheduler (the device plugin's count: no GPU seen computing)
                                  "mokutil", "secureboot-policy", "containerd-config", "crio-config",
                                  "crictl-info", "docker-info", "daemon-json", "pod-manifest",
                                  "kubectl-describe-pod", "kubectl-describe-node"}


def _setup_label(kind: str, found: dict[str, Any]) -> str:
    smi = found.get("smi") if kind == "smi-table" else None
    return SMI_HEADER_ONLY if smi is not None and smi.partial and not smi.gpus else kind


def _setup_inventory_only(log: list[Recognised]) -> str:
    """The setup inventories read ("a dpkg-list listing") when they are all that was understood; else empty."""
    kinds = [r.kind for r in log if r.kind]
    if not kinds or not set(kinds) <= SETUP_KINDS:
        return ""
    return ", ".join(dict.fromkeys(kinds))


# A line a kernel log holds for the GPU checks (what its parser reads); the rest of an untimed "log" is pasted text
_KERNEL_RECORD = lazy_re(r"NVRM|nvidia|nouveau|\bxid\b|nvswitch|pcieport|\bAER\b|DMAR|iommu|^\s*[\[<]\s*\d"
                         r"|^\s*pci(?:_bus)? [0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}", re.I)  # the PCI core's own lines (GH304)

# A record's form, as the kernel prints one: a bracketed timestamp, level or subsystem ("[drm] "), a subsystem's or
# driver's tag before a colon ("nvidia: ", "nvidia-modeset: ", "nvidia 0000:3b:00.0: ", "pcieport 0000:00:01.0: AER: ",
# "DMAR: "), the driver's NVRM tag, a stack frame's module ("[nvidia]"), or an indent (a record's second line: the
# driver breaks "The NVIDIA GPU ... installed in this system\n is not supported by ..."). A sentence that names
# nvidia-smi or the IOMMU has none: it is read as words.
_RECORD_FORM = lazy_re(r"^[ \t]|^(?:[\[<]\s{0,8}\d|\[[\w-]{1,20}\]\s|[\w.@-]{1,40}(?: [\w:.-]{1,40})?:(?:\s|$))|NVRM"
                       r"|\[(?:nvidia|nouveau)\w{0,12}\]")


def _kernel_record(line: str) -> bool:
    """Whether a line of an untimed log is the kernel's: it names what the GPU checks read, in a record's form."""
    return _KERNEL_RECORD.search(line) is not None and _RECORD_FORM.search(line) is not None


def _untimed(found: dict[str, Any]) -> bool:
    """Whether a parsed kernel log had no timestamps (format "plain"): pasted text, not a whole machine log."""
    log = found.get("kernel_log") if isinstance(found, dict) else None
    return isinstance(log, KernelLog) and log.format == "plain"


# A line the kernel log's parser reads as a record even without its timestamp (parsers/kernel_log._NEEDLES: the
# driver's tag, the NVSwitch driver's, an AER report): a record pasted without its prefix, not a person's words
_RECORD_WITHOUT_PREFIX = lazy_re(r"NVRM:|nvidia-nvswitch|: AER: ")
MAX_RUNS_READ = 40  # runs of words in one log read each on their own; the rest are read as one


def _words_between_records(reading: _Reading, piece: Piece, block: Block | None, logged: list[MessageLine]) -> None:
    """A person's sentences between the records of a timestamped kernel log (a pasted ``dmesg`` with the user's
    comments, a note at the end of a journal, a note after an arrow at a record's end) are read as a notes file's
    are: the catalogue, the symptoms and causes told in words and the facts stated, all of it the reporter's words.
    Each run of them (the lines between two records, a note) is read on its own; the lines of a run that nothing
    reads, and that no check names as a line kept, are named as not read (GH002), so that the report is never HEALTHY
    on words nobody understood. ``logged``: the lines the kernel log's own scan matched in the catalogue (read)."""
    from gpuhealth.parsers.kernel_log import annotations, unlogged_runs

    known = {m.line for m in logged}
    runs = [[line for line in run if line.strip()[:500] not in known and not _RECORD_WITHOUT_PREFIX.search(line)]
            for run in unlogged_runs(piece.text)]
    runs += [[note] for note in annotations(piece.text)]  # a note after an arrow at a record's end: read on its own
    runs = [run for run in runs if run]
    if len(runs) > MAX_RUNS_READ:
        runs[MAX_RUNS_READ - 1:] = [[line for run in runs[MAX_RUNS_READ - 1:] for line in run]]
    unread = [line for run in runs if not _read_run(reading, Piece(piece.name, "\n".join(run)), block)
              for line in run]
    if unread:
        reading.unrecognized.append(_not_read(piece.name, unread, "between the kernel log's records"))


def _not_read(name: str, lines: list[str], where: str) -> str:
    """How GH002 names a person's lines in a log that nothing read."""
    more = " ..." if len(lines) > 1 else ""
    return f"{name}: {len(lines)} line(s) {where}, not read ({lines[0].strip()[:60]!r}{more})"


def _read_run(reading: _Reading, words: Piece, block: Block | None) -> bool:
    """Read one run of a person's lines as pasted text is read; whether anything came of it: a line in the catalogue,
    a symptom or cause told, a fact stated, an error line kept (GH003 or GH002 name those), a field filled."""
    fields = dict(reading.fields)
    counts = (len(reading.messages), len(reading.stated), len(reading.log))
    _scan_messages(reading, words, None, (), True)
    if block is None or not block.command:  # a command's output is a program's text, not a person's statements
        _read_words(reading, words)
    after = (len(reading.messages), len(reading.stated), len(reading.log))
    return (counts != after or fields.keys() != reading.fields.keys()
            or any(reading.fields[k] is not v and reading.fields[k] != v for k, v in fields.items()))


# Kinds whose pieces are read line by line anyway (logs): a sentence in them is read where it stands
_READ_WHOLE = frozenset({"kernel-log", "app-log", "smi-xml"})


def _package_log_line(line: str) -> bool:
    from gpuhealth.parsers.package_log import is_log_line

    return is_log_line(line)


def _collect_env_line(line: str) -> bool:
    from gpuhealth.parsers.torch_env import report_line

    return report_line(line)


def _cuda_p2p_line(line: str) -> bool:
    from gpuhealth.parsers.cuda_p2p import sample_line

    return sample_line(line)


def _fabricmanager_line(line: str) -> bool:
    from gpuhealth.parsers.fabricmanager_log import fabricmanager_line

    return fabricmanager_line(line) is not None


def _mokutil_line(line: str) -> bool:
    from gpuhealth.parsers.install import mokutil_line

    return mokutil_line(line)


def _secureboot_policy_line(line: str) -> bool:
    from gpuhealth.parsers.install import secureboot_policy_line

    return secureboot_policy_line(line) is not None


# Kinds whose grammar knows their own lines, however sentence-like (collect_env's "Clang version: Could not collect",
# Fabric Manager's "[date] [INFO] [tid N] Successfully configured all the available NVSwitches ...", mokutil's
# "SecureBoot validation is disabled in shim", update-secureboot-policy's "All OK, nothing to do.")
_OWN_LINES = {"collect-env": _collect_env_line, "cuda-p2p-test": _cuda_p2p_line,
              "fabricmanager-log": _fabricmanager_line, "package-log": _package_log_line, "mokutil": _mokutil_line,
              "secureboot-policy": _secureboot_policy_line}


def _prose_beside(reading: _Reading, name: str, kind: str, text: str, pasted: bool) -> None:
    """A person's sentences pasted with a program's output (a listing, a table, lspci) are not read by its parser: they
    are read as the words they are (the catalogue, symptoms and facts told in words, error lines), and when nothing in
    them is understood the piece is named as not read in part, so the report is never HEALTHY on them. A section of a
    bug report or a capture (``pasted`` false) holds the machine's files, not a person's sentences: only a package
    listing's are looked at there."""
    from gpuhealth.evidence.listings import PACKAGE_LISTINGS, prose_lines

    if kind in _READ_WHOLE or (not pasted and kind not in PACKAGE_LISTINGS):
        return
    prose = prose_lines(text, edges_only=kind not in PACKAGE_LISTINGS, own=_OWN_LINES.get(kind))
    known = {line for _, line in scan_lines(prose)}  # the catalogue's lines: the kind's own scan reads them
    if known and kind in PACKAGE_LISTINGS:
        return  # (as before: a listing beside a line the catalogue knows was read)
    prose = [line for line in prose if line not in known]
    if not prose:
        return
    words = Piece(name, "\n".join(prose))
    before = len(reading.messages)
    read = _scan_messages(reading, words, None, (), True) > 0 or len(reading.messages) > before
    read = _read_words(reading, words) or read
    if read:
        return
    what = "listing" if kind in PACKAGE_LISTINGS else "output"
    reading.unrecognized.append(f"{name}: {len(prose)} line(s) of prose beside the {kind} {what}, "
                                f"not read ({prose[0][:60]!r}{' ...' if len(prose) > 1 else ''})")


_QUERY_FIELDS = guarded_re(r"--query-gpu[= ](?P<fields>[\w.,]{1,2000})", may=has("--query-gpu"))


def _with_csv_header(command: str | None, text: str) -> str:
    """``nvidia-smi --query-gpu=a,b --format=csv,noheader`` printed no header: the command names the columns."""
    m = _QUERY_FIELDS.search(command or "")
    if m is None or "noheader" not in (command or ""):
        return text
    return m["fields"].replace(",", ", ") + "\n" + text



_PIP_LIST_COMMAND = guarded_re(r"^(?:sudo\s+)?(?:\S{0,200}/)?(?:pip3?|python[\d.]*\s+-m\s+pip|uv\s+pip)\s+list\b",
                               may=has("list"))
_PIP_ROW = lazy_re(r"^[A-Za-z0-9][\w.-]{0,100}\s+\d[\w.+!-]{0,60}(?:\s+\S{1,400})?\s*$")


def _with_pip_header(command: str | None, text: str) -> str:
    """``pip list | grep torch`` printed rows without pip's header: the command says what they are, so the header
    goes back on (only when the first row has pip's "name  version" shape)."""
    if not _PIP_LIST_COMMAND.search((command or "").lstrip()) or "Package" in text[:200]:
        return text
    first = next((line for line in text.splitlines() if line.strip()), "")
    return "Package Version\n------- -------\n" + text if _PIP_ROW.match(first) else text

# `nvidia-smi -i 0 ...`, `--id=GPU-...`: the output is about the GPUs named, not all the driver sees
_SMI_SELECTS = guarded_re(r"^\S*\bnvidia-smi\b[^|\n]{0,300}?\s(?:-i|--id)(?:=|\s)\S", may=has("nvidia-smi"))


def _one_gpu_selected(command: str | None, found: dict[str, Any]) -> dict[str, Any]:
    """An nvidia-smi report of the GPUs ``-i``/``--id`` selected is an excerpt of the driver's list (GH102 must not
    count the others as missing)."""
    smi = found.get("smi")
    if isinstance(smi, SmiReport) and not smi.partial and _SMI_SELECTS.search((command or "").removeprefix("sudo ")):
        return {**found, "smi": replace(smi, partial=True)}
    return found


# `ls -l /dev/nvidia0 /dev/nvidiactl`: the files named, not a glob (`/dev/nvidia*`) or the directory (`/dev/`)
_LS_NAMES_NODES = lazy_re(r"^\S*\bls\b[^|;&*?\[\n]{0,300}?\s/dev/nvidia[\w-]")


def _nodes_named(command: str | None, found: dict[str, Any]) -> dict[str, Any]:
    """A listing of the /dev files a command named is an excerpt of /dev: a node it did not name is not missing
    (GH207 reads the mark)."""
    if "device_nodes" not in found or not _LS_NAMES_NODES.search((command or "").removeprefix("sudo ").lstrip()):
        return found
    return {**found, "unavailable": {DEVICE_NODES_NAMED: f"{(command or '')[:80]} lists only the files it names"}}


# `lspci -vv -s 01:00.0 | grep Lnk` (also `-vvvs 01:00.0`): the first stage of the pipeline names the device
_LSPCI_ONE = guarded_re(r"^\S*\blspci\b[^|\n]{0,200}?\s-[A-Za-z]{0,12}s\s*(?P<addr>(?:[0-9a-fA-F]{4}:)?"
                        r"[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])(?![\w:.])", may=has("lspci"))
_LINK_LINE = lazy_re(r"^\s*Lnk(?:Cap|Sta):\s", re.M)
_LSPCI_DEVICE_LINE = lazy_re(r"^\s*(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s", re.M)


def _with_lspci_address(command: str | None, text: str) -> str:
    """``lspci -vv -s ADDR | grep Lnk`` printed the link lines without the device's header line: the command
    names the device, so it becomes the header (vendor and class stay unknown: the lines do not say them)."""
    m = _LSPCI_ONE.search((command or "").removeprefix("sudo ").lstrip())
    if m is None or not _LINK_LINE.search(text) or _LSPCI_DEVICE_LINE.search(text):
        return text
    return f"{m['addr']} Device:\n{text}"


def _read_facts(reading: _Reading, piece: Piece, block: Block) -> bool:
    command = block.command or ""
    if block.language == "python":
        command = f"python -c {command!r}"  # the facts read Python statements the way `python -c` shows them
    found = facts_for(command, block.output)
    for name, fact in found:
        reading.overlay(fact.overlays, piece.name)
        if fact.symptom:
            reading.messages.append(MessageLine(fact.note, piece.name, None, fact.symptom))
        reading.log.append(Recognised(piece.name, f"fact:{name}", fact.note))
    return bool(found)


# Lines that look like an error in any tool's words (the catalogue decides what they mean); logrus's error level
# ("ERRO[0000]", "level=error": the container toolkit's and docker's logs) and klog's ("E0819 07:02:54.757556  1
# rm.go:109]": the Kubernetes device plugin's) mark one whatever its words.
_ERROR_WORD = lazy_re(r"(?:error|errors|exception)\b|\bERRO\[|^\s*E\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+:\d+\]|"
                         r"\b(?:failed|failure|fatal|cannot|can't|couldn't|"
                         r"unable|refused|denied|not found|no such|invalid|timed out|segmentation fault|panic|"
                         r"abort(?:ed)?|unknown symbol|not supported|mismatch)\b", re.I)
# Lines that say nothing failed: no errors, a test runner's count of none failed ("100% tests passed, 0 tests failed
# out of 3": CTest; "0 failed"). A logrus level prefix alone ("ERRO[0002]": a message that starts with a newline, such
# as nvidia-mig-parted's logging of the nvidia-smi output it ran) says nothing: its text follows on the next lines.
_NOT_AN_ERROR = lazy_re(r"\b(?:no|0|zero|without) (?:errors?|failures?)\b|\berrors?\s*[:=]\s*0\b|"
                           r"\b(?:no|0|zero) (?:[\w-]{1,20} ){0,2}(?:failed|failing)\b|"
                           r"\b(?:error|fail)[\w ]{0,30}:\s*(?:0|none|n/a|no|disabled)\s*$|"
                           r"^(?:ERRO|WARN|FATA|PANI)\[\d{1,10}\]$", re.I)
# Kernel logs are long and mostly about other things: only lines that can concern a GPU are matched.
_KERNEL_RELEVANT = lazy_re(r"nvidia|nvrm|nouveau|xid|nvswitch|fabric|gsp|module|secure ?boot|dmar|iommu|"
                              r"AER|pcieport|cuda|nccl|PKCS#7|lockdown|X\.509", re.I)
MAX_SCANNED_LINES = 20_000  # per piece: the catalogue's cost is per line
MAX_UNKNOWN_LINES = 40  # error lines nobody explains, over all the evidence
# Outputs of a few fixed lines (a version banner): any other line pasted with them, an error above all, is read too
_FEW_LINE_KINDS = ("proc-version", "kernel-version", "gcc-version", "nvcc-version", "uname")
_STRUCTURED_UNSCANNED = ("smi-xml", "smi-query", "smi-csv", "lspci", "lsmod", "os-release", "driver-params")


ReadBy = Callable[[str], bool]
MAX_READ_PROBES = 32  # per piece: each probe parses the piece again


def _read_by(kind: Any, text: str, source: str, whole: dict[str, Any]) -> ReadBy:
    """Whether the parser of ``kind`` read a line of ``text``: what it makes of the text changes (or it fails) without
    that line. A piece routed to a kind may hold other programs' lines (a device plugin's log beside a containerd
    configuration, a Docker error under a listing): only a line its parser read was seen by the checks that judge that
    kind, so only such a line is left to them; a line the parser passed over is anybody's, read like pasted text.
    ``whole``: the parser's reading of the whole text. A line the piece does not hold as it is (its text was adjusted
    before parsing), and any line past the probes' limit, counts as read, as every line of a parsed piece once did."""
    lines = text.splitlines(keepends=True)
    held = {line.rstrip("\r\n") for line in lines}
    seen: dict[str, bool] = {}

    def was_read(line: str) -> bool:
        if line not in seen:
            if line not in held or len(seen) >= MAX_READ_PROBES or (kind.owns is not None and kind.owns(line)):
                return True
            try:
                seen[line] = kind.parse("".join(x for x in lines if x.rstrip("\r\n") != line), source) != whole
            except ParseError:  # the piece is not its kind without the line: the parser read it
                seen[line] = True
        return seen[line]

    return was_read


def _scan_pasted_errors(reading: _Reading, piece: Piece) -> int:
    """A tool's message pasted with a table of values (``lsmod`` with a failed ``modprobe`` below it, ``lspci -k`` with
    nvidia-smi's failure): the table's parser skips the line, so the catalogue reads it here, as a pasted line no
    check saw. Only unindented lines (lspci's detail lines are values), and only catalogue lines: a device named
    "... Channel 3 ERROR Registers" is a value too."""
    lines = [line for line in piece.text.splitlines()[:MAX_SCANNED_LINES] if line[:1] not in ("", " ", "\t", "<")]
    matched = scan_lines(lines)
    for sig, line in matched:
        reading.messages.append(MessageLine(line.strip()[:500], piece.name, sig.id, sig.symptom or None))
    return len(matched)


# CUDA's P2P samples stop on a failed call with their own line (cudaCheckError's "Cuda failure <file>:<line>: '<error
# string>'", helper_cuda.h's "CUDA error at"): the sample's parser reads its matrices, not that line
_SAMPLE_FAILURE = ("Cuda failure ", "CUDA error at ")


def _asked_about(sig: Any, line: str) -> bool:
    """Whether ``line`` asks about the message it quotes ("Unexpected error from cudaGetDeviceCount()?", a thread's
    title): the message stops at a question mark that ends the line. No program ends its message with the person's
    question; the line is the reporter's words, not the program's output (PyTorch's own line goes on after it)."""
    text = line.rstrip()
    if not text.endswith("?"):
        return False
    found = sig.regex.search(text)
    return found is not None and text[found.end():].strip() in ("?", ")?", "'?", '"?', "`?")


def _in_parsed_part(kind: str | None, line: str) -> bool:
    """Whether the parser of ``kind`` read ``line``: an nvidia-smi table's parser reads its boxed rows, not a
    pasted error above it (a podman CDI error pasted with the table must not pass for judged by the GPU checks);
    a P2P sample's parser does not read the failure the sample stopped on (a crashed sample is no healthy one)."""
    if kind == "cuda-p2p-test":
        return not line.lstrip().startswith(_SAMPLE_FAILURE)
    return kind != "smi-table" or line.lstrip().startswith(("|", "+"))


def _scan_messages(reading: _Reading, piece: Piece, kind: str | None, read_into: tuple[str, ...],
                   unknown_lines: bool, was_read: ReadBy | None = None) -> int:
    """Signature matches of a piece; error lines no signature explains when the piece was not parsed, or that its
    parser did not read. ``read_into``: the snapshot fields the piece was parsed into (checks reading them saw the
    lines its parser read); ``was_read``: whether the parser read a line (:func:`_read_by`)."""
    if kind in _STRUCTURED_UNSCANNED:  # tables of values: their parsers and the checks judge them
        if kind == "lspci":  # lspci -vvv's ACSCtl lines: the bridges' ACS setting (GH706)
            reading.overlay(p2p_lines(piece.text.splitlines()[:MAX_SCANNED_LINES]), piece.name)
        matched = _scan_pasted_errors(reading, piece)
        if not unknown_lines or was_read is None:
            return matched
        # another program's error pasted with the table (a device plugin's NVML failure under lspci): read like text
        lines = [line for line in piece.text.splitlines()[:MAX_SCANNED_LINES] if line[:1] not in ("", " ", "\t", "<")]
        explained = {m.line for m in reading.messages if m.source == piece.name}
        return matched + _error_lines(reading, piece, kind, _unread(lines, explained, was_read), set())
    lines = piece.text.splitlines()
    if kind == "kernel-log" or len(lines) > MAX_SCANNED_LINES:
        lines = [line for line in lines if _KERNEL_RELEVANT.search(line)]
    lines = lines[:MAX_SCANNED_LINES]
    if unknown_lines or kind == "kernel-log":  # settings and failures in words: ACS, IOMMU, NCCL hangs (GH706)
        reading.overlay(p2p_lines(lines), piece.name)
    if kind != "mokutil":  # the Secure Boot state in the words of the tools that print it (GH506)
        reading.overlay(secure_boot_lines(lines, piece.name), piece.name)
    reading.overlay(signing_key_lines(lines, piece.name), piece.name)  # mokutil --test-key's answer (GH506)
    reading.overlay(lockdown_lines(lines, piece.name), piece.name)  # kernel lockdown refuses unsigned modules (GH506)
    reading.overlay(module_key_lines(lines, piece.name), piece.name)  # the module's signer, the enrolled MOKs (GH506)
    reading.overlay(kbuild_compiler_lines(lines, piece.name), piece.name)  # the kernel build's two compilers (GH505)
    if unknown_lines and any("compatibility mode is UNAVAILABLE" in line for line in lines):
        from gpuhealth.parsers.ngc import ngc_driver_lines  # an NGC container's refusal: its CUDA, the driver (GH601)

        reading.overlay(ngc_driver_lines(lines), piece.name)
    if unknown_lines and any(" CUDA " in line and "driver" in line for line in lines):
        from gpuhealth.parsers.driver_too_old import program_cuda_lines  # the CUDA a program needs (GH601)

        reading.overlay(program_cuda_lines(lines), piece.name)
    if unknown_lines and kind in (None, "app-log"):  # the GPU index a program's code or traceback asks for (GH608)
        reading.overlay(device_request_lines(lines), piece.name)
    if unknown_lines and kind in (None, "app-log"):  # a script, prose or logged command line that sets
        reading.overlay(env_lines(lines), piece.name)   # CUDA_VISIBLE_DEVICES (GH608 judges it)
    if unknown_lines and may_show_container(piece.text):  # a container the program ran in (CUDA 803/804: GH601, GH603)
        from gpuhealth.parsers.container_run import container_run_lines

        reading.overlay(container_run_lines(lines), piece.name)
    if unknown_lines and kind is None:
        reading.overlay(embedded_rpm_packages(lines, piece.name), piece.name)  # driver packages named (GH509)
        from gpuhealth.parsers.gpu_mentions import mention_overlay  # GPUs and driver versions named (GH209)

        reading.overlay(mention_overlay(lines, piece.name), piece.name)
    reported = _reported_xids(reading, piece, kind, lines)
    matched = scan_lines(lines)
    # a symptom in the reporter's own words ("nvidia-smi takes forever"): its differential ranks the causes. A line
    # the catalogue knows is a program's message ("NVIDIA-SMI has failed ..."), not the reporter's words
    told: set[str] = set()
    if unknown_lines and kind in (None, "app-log"):
        known = {line for _, line in matched}
        told = _told_symptoms(reading, piece, [line for line in lines if line not in known],
                              [line for line in lines if line in known])
        told |= _linked_titles(reading, piece, lines)
    for sig, line in matched:
        reading.messages.append(MessageLine(line.strip()[:500], piece.name, sig.id, sig.symptom or None,
                                            read_into=read_into if _in_parsed_part(kind, line)
                                            and _judged_by_parser(kind, line, was_read) else (),
                                            mined=_mined_behind(sig.id, line),
                                            reported=is_words_row(sig.id) or _asked_about(sig, line)))
    # nvidia-container-cli's own error line: its reader reads NVML's failures; any other is an error line (GH310)
    cli_error = kind == "container-cli-info" and "nvml" not in read_into
    # nvidia-installer's log: its parser reads the run's result; the lines the installer warned with are read here
    scanned = kind in (None, "app-log", "smi-table", "installer-log", *_FEW_LINE_KINDS)
    if not unknown_lines:
        return len(matched)
    # the application-log parser reads catalogue lines only (GH806); a line naming an Xid is a reported Xid event; a
    # line telling a symptom in words is the reporter's (parsers/prose_symptoms.py)
    explained = {line for _, line in matched} | set(reported) | told
    if not scanned and not cli_error:
        if kind == "kernel-log" or was_read is None:  # the kernel log's other lines: _words_between_records
            return len(matched)
        # another program's error lines in a piece of this kind: those its parser did not read are read as pasted
        # lines (never taken for judged because the piece was routed to the kind)
        earlier = {m.line for m in reading.messages if m.source == piece.name and m.signature is None}
        return len(matched) + _error_lines(reading, piece, kind, _unread(lines, explained | earlier, was_read), set())
    explained |= _read_banners(reading, piece, kind, read_into, lines)  # nvcc's, nvidia-smi's ... version lines
    return len(matched) + _error_lines(reading, piece, kind, lines, explained)


def _judged_by_parser(kind: str | None, line: str, was_read: ReadBy | None) -> bool:
    """Whether the parser of the piece's kind read ``line`` (a kernel log's lines are judged by :func:`_judged`'s
    own rule: every program writes to it)."""
    return kind == "kernel-log" or was_read is None or was_read(line)


def _unread(lines: list[str], explained: set[str], was_read: ReadBy) -> list[str]:
    """The error-looking lines of a parsed piece that its parser did not read (the others are its kind's)."""
    return [line for line in lines if line.strip() and line not in explained and line.strip()[:500] not in explained
            and (_ERROR_WORD.search(line) or _mentions_api(line)) and not was_read(line)]


def _mentions_api(line: str) -> bool:
    from gpuhealth.knowledge.mined_api import mentions_api

    return mentions_api(line)


def _error_lines(reading: _Reading, piece: Piece, kind: str | None, lines: list[str], explained: set[str]) -> int:
    """Error lines no signature explains: a CUDA, NVML, NCCL or DCGM error the mined table names, kept with its row
    (the count returned: read, so the piece was understood), or an error line nobody knows."""
    named = 0  # lines the mined table names (GH309): read, so the piece was understood
    lines = _join_bare_exceptions(lines, explained)
    for line in lines:
        if len(reading.unknown_seen) >= MAX_UNKNOWN_LINES:
            break
        if kind == "smi-table" and _in_parsed_part(kind, line):
            continue  # the table's rows: its parser and the checks judge them
        text = line.strip()
        if text and line not in explained and text not in reading.unknown_seen and _api_error(reading, piece, text):
            named += 1
            continue
        if (text and line not in explained and text not in reading.unknown_seen
                and ((_ERROR_WORD.search(text) and not _NOT_AN_ERROR.search(text)) or _installer_warning(text))):
            reading.unknown_seen.add(text)
            # a person's sentence about an error is kept as their words (GH002 names it as not read), not as an error
            # line nobody knows (GH003)
            reading.messages.append(MessageLine(text[:500], piece.name, reported=_persons_line(text)))
    return named


def _installer_warning(text: str) -> bool:
    """nvidia-installer's ``WARNING: `` line (ui_warn's prefix) that a mined installer row names: its warnings hold no
    error word ("The NVIDIA ... GPU installed in this system is supported through the NVIDIA 470.xx legacy Linux
    graphics drivers"), yet they say why the driver will not drive a GPU (GH310)."""
    if not text.startswith("WARNING: "):
        return False
    from gpuhealth.knowledge.mined_tools import match  # here: only a line with the installer's prefix needs it

    row = match(text)
    return row is not None and row.component == "nvidia-installer"


def _persons_line(text: str) -> bool:
    """A person's sentence about an error (parsers/prose.persons_line), not a program's error line."""
    from gpuhealth.parsers.prose import persons_line

    return persons_line(text)


# An exception's name alone on its line ("RuntimeError:"), its message on the next: Python prints a message that
# starts with a newline that way (raise RuntimeError("\\n" + text)), and people's pastes wrap it there too
_BARE_EXCEPTION = lazy_re(r"^\s{0,8}[A-Za-z_][\w.]{0,80}(?:Error|Exception|Warning):\s*$")


def _join_bare_exceptions(lines: list[str], explained: set[str]) -> list[str]:
    """``lines`` with each bare exception name joined to the message on the line below it: one error line, not two.
    Where the message is a line already explained (the catalogue knows it), the name alone says nothing more."""
    out: list[str] = []
    skip = False
    for number, line in enumerate(lines):
        if skip:
            skip = False
            continue
        below = lines[number + 1] if number + 1 < len(lines) else ""
        if not _BARE_EXCEPTION.match(line) or not below.strip():
            out.append(line)
        elif below in explained:
            out.append(below)
            skip = True
        else:
            out.append(f"{line.strip()} {below.strip()}")
            skip = True
    return out


VERSION_BANNERS = "version banners"


def _read_banners(reading: _Reading, piece: Piece, kind: str | None, read_into: tuple[str, ...],
                  lines: list[str]) -> set[str]:
    """A program's version line pasted among other text (parsers/banners.py: nvcc's, /proc/driver/nvidia/version's,
    nvidia-smi's header, /proc/version's, gcc's, torch's) fills its field where the piece's own kind did not fill
    it (an nvidia-smi table's boxed rows are its parser's); the lines read."""
    if kind not in (None, "app-log", "smi-table", *_FEW_LINE_KINDS):
        return set()
    from gpuhealth.evidence.banners import banner_fields

    lines = [line for line in lines if not (kind == "smi-table" and _in_parsed_part(kind, line))]
    found, banners = banner_fields("\n".join(lines), read_into)
    if not found:
        return set()
    reading.overlay(found, piece.name)
    reading.log.append(Recognised(piece.name, VERSION_BANNERS, ", ".join(dict.fromkeys(b.program for b in banners))))
    return {lines[b.index] for b in banners}


LINKED_TITLES = "linked thread titles"


def _linked_titles(reading: _Reading, piece: Piece, lines: list[str]) -> set[str]:
    """The lines linking a thread whose address holds its title (parsers/linked_titles.py: Stack Exchange, Discourse,
    Reddit): the title's words are read like the reporter's own (the catalogue with punctuation made optional,
    knowledge/title_words.py, else the symptom phrases), each kept as a reported line showing the address; the lines
    whose title was read, so that none of them also counts as an error line nobody knows."""
    linking = [line for line in lines if "://" in line]
    if not linking:
        return set()
    from gpuhealth.knowledge.title_words import match_title
    from gpuhealth.parsers.linked_titles import as_sentence, linked_titles
    from gpuhealth.parsers.prose_symptoms import told_symptoms

    read: set[str] = set()
    for title in linked_titles("\n".join(linking)):
        evidence = f"{title.address} (the title of a thread the reporter linked: {title.words!r})"
        sig = match_title(title.words)
        told = told_symptoms(as_sentence(title.words)) if sig is None else []
        if sig is not None:
            reading.messages.append(MessageLine(evidence, piece.name, sig.id, sig.symptom or None, reported=True))
        elif told:
            reading.messages.append(told_message(told[0], evidence, piece.name))
        stated = _title_facts(title.words, evidence, piece.name)
        reading.stated.extend(stated)
        if sig is not None or told or stated:
            read.update(line for line in linking if title.address in line)
    if read:
        reading.log.append(Recognised(piece.name, LINKED_TITLES, f"{len(read)} line(s) linking a thread by its title"))
    return read


def _title_facts(words: str, evidence: str, source: str) -> list[Any]:
    """The unit and install states a linked title states in words ("nvidia-fabricmanager-is-not-running"), each
    showing the address. Not its versions nor its PCIe links: a slug drops the dots and slashes of their numbers
    ("cuda-12-2" may be 12.2 or 12 and 2)."""
    from gpuhealth.evidence.prose import Statement
    from gpuhealth.parsers.prose import install_statements, unit_statements

    return [Statement(replace(fact, words=evidence), source)
            for fact in (*unit_statements(words), *install_statements(words))]


def _told_symptoms(reading: _Reading, piece: Piece, lines: list[str], known: list[str] = ()) -> set[str]:
    """The lines whose sentences tell a symptom in words (parsers/prose_symptoms.py), each kept as a reported line of
    that symptom; the lines, so that none of them also counts as an error line nobody knows. A line the catalogue
    knows (``known``) is a program's message, but a person may paste it inside their own sentences ("nvidia-smi says
    `NVIDIA-SMI has failed ...`; I think the MOK enrollment never finished"): there only a cause named in a sentence
    the catalogue does not match is read."""
    from gpuhealth.knowledge.signatures import match_line
    from gpuhealth.parsers.linked_titles import without_addresses
    from gpuhealth.parsers.prose_symptoms import told_symptoms  # read only for text nobody parsed

    told = set()
    words = "\n".join(without_addresses(line) for line in lines)
    for found in told_symptoms(words):
        reading.messages.append(told_message(found, found.sentence[:500], piece.name))
        told.add(lines[found.line])
    if _UPGRADE_WORDS.search(words):  # an OS upgrade told: kept aside until the whole evidence is read
        from gpuhealth.parsers.os_upgrade import upgrade_events

        reading.upgrades.extend(upgrade_events(words.splitlines(), piece.name))
    for found in told_symptoms("\n".join(without_addresses(line) for line in known), causes_only=True) if known else ():
        if _named_beside_message(found, match_line(found.sentence)):
            reading.messages.append(told_message(found, found.sentence[:500], piece.name))
    if told:
        reading.log.append(Recognised(piece.name, "reported symptom", f"{len(told)} line(s) in the reporter's words"))
    return told


# the reader of package tools' kernel installs (parsers/os_upgrade.py) is imported only for a text that could hold one
_MAY_SHOW_UPGRADE = has("kernel-", "linux-", "update", "upgrade")
# the reader of OS upgrades told (parsers/os_upgrade.py) is imported only for words that could tell one
_UPGRADE_WORDS = lazy_re(r"(?i)kernel|upgrad|updat|unattended|release|patch|\bhwe\b|hardware enablement|-syu\b|"
                         r"ubuntu|debian|rhel|red hat|rocky|alma|centos|fedora|oracle linux|sles|suse|mint|pop")


def _named_beside_message(found: Any, sig: Any) -> bool:
    """Whether the cause ``found`` names is read in its sentence without the catalogue message it holds (``sig``'s
    match): "cuInit keeps returning CUDA_ERROR_UNKNOWN until I run nvidia-modprobe -u" names the cause in the
    reporter's own words beside the message; a message whose own text reads as a cause names none."""
    if sig is None:
        return True
    from gpuhealth.parsers.prose_symptoms import told_symptoms

    shown = sig.regex.search(found.sentence)
    if shown is None:
        return False
    rest = found.sentence[:shown.start()] + " " * (shown.end() - shown.start()) + found.sentence[shown.end():]
    return any(t.cause == found.cause for t in told_symptoms(rest, causes_only=True))


def told_message(found: Any, shown: str, source: str) -> MessageLine:
    """The reported line of a sentence the words readers read (parsers/prose_symptoms.Told): a symptom it tells, or a
    cause it names, filed under that cause's stand-in catalogue row (``told:<row>``), so the checks and the diagnosis
    read it as a line naming the cause, the reporter's words (below critical)."""
    if found.cause:  # a fix the reporter says worked confirms the cause: its own stand-in row (FIXED_SUFFIX)
        from gpuhealth.knowledge.symptom_phrases import FIXED_SUFFIX, TOLD_PREFIX

        return MessageLine(shown, source, f"{TOLD_PREFIX}{found.phrase}{FIXED_SUFFIX if found.confirmed else ''}",
                           None, reported=True)
    return MessageLine(shown, source, None, found.symptom, reported=True)


# the reader is imported only for a piece that holds the word, or a word of a memory fault told (GH403)
_NAMES_XID = lazy_re(r"(?i)xid|remap|retire|\becc\b|uncorrectable|double.bit|again|\bback\b|recur|reappear|persist"
                     r"|\bstill\b|\breturn")


def _reported_xids(reading: _Reading, piece: Piece, kind: str | None, lines: list[str]) -> list[str]:
    """Xids and SXids a person names outside a kernel log's lines ("Xid 48 / 171" in a note, a title, a chat): a
    reported kernel log (parsers/reported_xids.py), which a real one in the evidence replaces (``_merge``). The
    lines that named them are returned."""
    if not _NAMES_XID.search(piece.text) and "Marking all devices as unhealthy" not in piece.text:
        return []  # (the device plugin's line for an event without a UUID names its Xid without the word)
    if kind == "kernel-log":  # the log's own lines are its parser's; a memory fault told beside them is GH403's
        from gpuhealth.parsers.reported_xids import told_beside_log

        every = piece.text.splitlines()[:MAX_SCANNED_LINES]  # all its lines
        plugin = _plugin_xids(reading, piece, every)  # the device plugin's Xid lines pasted among the kernel's
        found, named = told_beside_log([line for line in every if line not in plugin], piece.name)
        if found:
            reading.overlay(found, piece.name)
        return plugin + named
    plugin = _plugin_xids(reading, piece, lines)  # the device plugin's own Xid lines are machine output, not words
    from gpuhealth.parsers.reported_xids import reported_xids  # only for a piece that is no kernel log

    # an nvidia-smi table's boxed rows are its parser's too
    found, named = reported_xids([line for line in lines if not (kind == "smi-table" and _in_parsed_part(kind, line))
                                  and line not in plugin], piece.name)
    named = plugin + named
    if found:
        reading.overlay(found, piece.name)
        events = found["kernel_log"].events
        codes = ", ".join(dict.fromkeys(f"{'SXid' if e.kind == 'sxid' else 'Xid'} {e.xid}" for e in events
                                        if e.xid is not None))
        told = ", ".join(dict.fromkeys(f"memory {e.detail}" for e in events if e.xid is None))
        reading.log.append(Recognised(piece.name, "reported-xids", f"{', '.join(filter(None, (codes, told)))} named "
                                      "in words (reported, not logged)"))
    return named


def _plugin_xids(reading: _Reading, piece: Piece, lines: list[str]) -> list[str]:
    """The Xids the NVIDIA device plugin logged from NVML's events (``XidCriticalError: Xid=79 on Device=GPU-...``):
    a machine-written Xid log (parsers/device_plugin_xids.py) the Xid checks judge as logged; the lines it read."""
    if "riticalError" not in piece.text and "Marking all devices as unhealthy" not in piece.text:
        return []
    from gpuhealth.parsers.device_plugin_xids import plugin_xids

    found, named = plugin_xids(lines, piece.name)
    if found:
        reading.overlay(found, piece.name)
        codes = ", ".join(dict.fromkeys(f"Xid {e.xid}" for e in found["kernel_log"].events))
        reading.log.append(Recognised(piece.name, "device-plugin-xids",
                                      f"{codes} from the NVIDIA device plugin's NVML events"))
    return named


def _api_error(reading: _Reading, piece: Piece, text: str) -> bool:
    """A CUDA, NVML, NCCL or DCGM error that no signature explains but the mined table names (GH309): kept with its
    row and the row's symptom, never as an unknown line. The table is read only for a line that names such an API.
    A CUDA error named by its number or its name's stem ("CUDA error 35", "CUDAError InsufficientDriver") is the same
    row (``mined_api.named_error``), and the catalogue's row for its C name, where there is one."""
    from gpuhealth.knowledge import mined_api

    if not mined_api.mentions_api(text):
        return False
    row = mined_api.named_error(text[:500])
    if row is None:
        return False
    if not row.name or row.name not in text:  # another spelling: a program's own message around it says more
        from gpuhealth.knowledge import mined_tools  # (the device plugin's "failed to initialize NVML: ERROR_...")

        if mined_tools.match(text[:500]) is not None:
            return False
    reading.unknown_seen.add(text)
    # named in another spelling: the catalogue's row for the C name, if it has one, judges it as it judges that name
    spelled = scan_lines([row.name]) if row.api.startswith(("cuda", "nvml")) and row.name not in text else []
    signature, symptom = (spelled[0][0].id, spelled[0][0].symptom or None) if spelled else (None, row.symptom or None)
    reading.messages.append(MessageLine(text[:500], piece.name, signature, symptom, mined=row.id))
    return True


# Catalogue rows that say only which library printed a line ("NCCL printed a warning"): the mined table says which
# warning it is, where NCCL prints it, and the check it points to (GH309, as information beside the row's finding).
_GENERIC_SIGNATURES = frozenset({"nccl-warn"})


def _mined_behind(signature_id: str, line: str) -> str:
    if signature_id not in _GENERIC_SIGNATURES:
        return ""
    from gpuhealth.knowledge.mined_api import lookup

    row = lookup(line.strip()[:500])
    return row.id if row is not None else ""


def _beside_plugin(current: KernelLog, value: KernelLog) -> KernelLog:
    """A kernel log joined with the device plugin's Xid lines, in either order: the kernel log's lines (with the GPU's
    PCI address) judge every Xid they show, and the plugin adds only the Xids the kernel log does not show."""
    kernel, plugin = (value, current) if current.format == DEVICE_PLUGIN else (current, value)
    shown = {g.xid for g in kernel.tallies({"xid"})}
    added = tuple(g for g in plugin.groups if g.xid not in shown)
    if not added:
        return kernel
    return replace(kernel, source=f"{kernel.source}, {plugin.source}", lines_scanned=kernel.lines_scanned
                   + plugin.lines_scanned, events=kernel.events + tuple(g.first for g in added),
                   groups=kernel.groups + added)


def _merge(fields: dict[str, Any], key: str, value: Any) -> bool:
    """Combine a parsed value into the snapshot fields; True when it became (part of) the value.

    The richest nvidia-smi report wins; kernel logs are joined; tuples are concatenated (duplicates
    dropped), dicts updated, and a dataclass (install, host_env, cuda...) gets every field the new
    piece knows laid over it. Anything else: the first piece that gave it keeps it.
    """
    current = fields.get(key)
    if current is None:
        fields[key] = value
        return True
    if key == "smi" and isinstance(value, SmiReport) and (value.partial or current.partial):
        # the whole list takes the excerpt in; of two excerpts, the one showing more GPUs takes the other in
        swap = value.partial < current.partial or (value.partial == current.partial
                                                   and len(value.gpus) > len(current.gpus))
        whole, piece = (value, current) if swap else (current, value)
        fields[key] = fill_gpus(whole, piece)
        return fields[key] != current
    if key == "smi" and isinstance(value, SmiReport) and SMI_RANK.get(value.format, 0) > SMI_RANK.get(
            current.format, 0):
        fields[key] = value
        return True
    if key == "kernel_log" and isinstance(value, KernelLog) and current.reported != value.reported:
        # Xids a person named against a log the machine wrote: the log wins, whichever came first. A memory fault the
        # person tells (a recurrence after a reboot, a growing count, a remap failure) is kept beside it: no log line
        # says it, and GH403 holds it to the GPU whose memory Xids the log shows
        logged, words = (current, value) if value.reported else (value, current)
        from gpuhealth.parsers.reported_xids import MEMORY_TOLD  # a reported log was read: the module is loaded

        told = tuple(e for e in words.events if e.kind == MEMORY_TOLD)
        fields[key] = replace(logged, events=logged.events + told) if told else logged
        return not value.reported or bool(told)
    if key == "kernel_log" and isinstance(value, KernelLog) and DEVICE_PLUGIN in (current.format, value.format) and (
            current.format != value.format):
        fields[key] = _beside_plugin(current, value)
        return True
    if key == "kernel_log" and isinstance(value, KernelLog):
        fields[key] = replace(current, source=f"{current.source}, {value.source}",
                              lines_scanned=current.lines_scanned + value.lines_scanned,
                              events=current.events + value.events,
                              module_banners=current.module_banners + value.module_banners,
                              groups=current.groups + value.groups, xids=current.xids + value.xids,
                              bytes_scanned=current.bytes_scanned + value.bytes_scanned,
                              # each file numbers its own lines: a driver load in one cannot be placed among
                              # the other's Xids, so the merged log claims none (GH403 sees no reset between)
                              driver_loads=())
        return True
    if key == "pci_devices" and isinstance(current, tuple) and isinstance(value, tuple):
        from gpuhealth.parsers.lspci import merge_devices  # here: analyze of files imports only what it reads

        merged = merge_devices(current + value)  # one per address; a later listing fills what one lacked
        fields[key] = merged
        return merged != current
    if isinstance(current, tuple) and isinstance(value, tuple):
        known = {getattr(v, "address", v) for v in current}  # first wins
        new = tuple(v for v in value if getattr(v, "address", v) not in known)
        fields[key] = current + new
        return bool(new)
    if isinstance(current, dict) and isinstance(value, dict):
        fields[key] = {**current, **value}
        return True
    if dataclasses.is_dataclass(current) and type(current) is type(value) and key != "smi" and all(
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            for f in dataclasses.fields(value)):
        fields[key] = _overlay(current, value)
        return True
    return False


def fill_gpus(whole: SmiReport, piece: SmiReport) -> SmiReport:
    """``whole`` with what an excerpt of nvidia-smi -q (``piece``: `-q | grep -A8 "GPU Link Info"`) says about its
    GPUs filled in where ``whole`` lacks it. A GPU of the piece is matched by PCI address, else by index, else
    it is the only GPU on both sides; one that matches none is left out (its GPU is unknown). An excerpt never
    replaces a whole list (its GPUs would count as all the driver sees), however rich its format."""
    gpus = list(whole.gpus)
    for gpu in piece.gpus:
        at = next((i for i, g in enumerate(gpus) if gpu.pci_address and g.pci_address == gpu.pci_address), None)
        if at is None and gpu.pci_address is None:
            at = next((i for i, g in enumerate(gpus) if gpu.index is not None and g.index == gpu.index), None)
            if at is None and len(gpus) == 1 and len(piece.gpus) == 1 and gpu.index is None:
                at = 0
        if at is None:
            continue
        known = {f.name: getattr(gpu, f.name) for f in dataclasses.fields(gpu)
                 if f.name != "source" and getattr(gpus[at], f.name) in (None, ()) and getattr(gpu, f.name)
                 not in (None, ())}
        gpus[at] = replace(gpus[at], **known)
    return replace(whole, gpus=tuple(gpus), driver_version=whole.driver_version or piece.driver_version,
                   cuda_version=whole.cuda_version or piece.cuda_version,
                   partial=whole.partial and piece.partial)


_ACCUMULATED = frozenset({"library_files", "ld_so_conf", "kernel_packages", "headers_packages",  # each piece adds
                          "modprobe_files", "tests", "acs_bridges",  # (p2p: each sample's run, each lspci's bridges)
                          "sleep_units"})  # each systemctl status adds its suspend units


def _overlay(current: Any, value: Any) -> Any:
    """``current`` with every field ``value`` knows (not its default) taken from ``value``."""
    changes = {}
    for f in dataclasses.fields(value):
        new = getattr(value, f.name)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if new != default:
            old = getattr(current, f.name)
            # the library files every piece names add up: one piece shows the wheel's copy, another the system's
            changes[f.name] = tuple(dict.fromkeys(old + new)) if f.name in _ACCUMULATED else new
    return replace(current, **changes)


# Parts of ``install`` and ``host_env`` pasted evidence may lack: (attribute that holds it, what is missing).
_INSTALL_PARTS = {
    "install_modprobe": ("modprobe_files", "the modprobe.d files"), "install_initramfs": (None, "the initramfs"),
    "install_initramfs_listing": (None, "the initramfs listing"), "install_headers": (None, "the kernel headers"),
    "install_kernel": (None, "the running kernel's release"), "install_kernels": (None, "the installed kernels"),
    "install_gcc": (None, "gcc --version"), "install_make": (None, "make --version"),
    "install_secure_boot": ("secure_boot", "mokutil --sb-state"), "install_dkms": ("dkms", "dkms status")}
_ENV_PARTS = {
    "env_default_target": ("default_target", "systemctl get-default"),
    "env_kernel_cmdline": ("kernel_cmdline", "/proc/cmdline"),
    "env_runfile": ("runfile_log", "/var/log/nvidia-installer.log"),
    "env_packages": ("packages", "the installed nvidia packages (dpkg-query / rpm -qa)"),
    "env_nvidia_ctk": (None, "nvidia-ctk --version"), "env_docker_info": (None, "docker info"),
    "env_driver_params": ("driver_params", "/proc/driver/nvidia/params"),
    "env_mounts": (None, "/proc/self/mounts"), "env_disk_space": (None, "df -P -l")}


def _unavailable(fields: dict[str, Any]) -> dict[str, str]:
    """Loose evidence only covers what was given; say so for everything else."""
    names = ("pci_devices", "driver", "kernel_modules", "device_nodes", "smi", "smi_run", "nvml",
             "kernel_log", "os", "cuda")
    missing = {name: "not in the evidence given" for name in names if name not in fields}
    for key, parts in (("install", _INSTALL_PARTS), ("host_env", _ENV_PARTS)):
        given = fields.get(key)
        if given is None:
            continue
        for name, (attribute, what) in parts.items():
            if attribute is None or not getattr(given, attribute):
                missing[name] = f"{what}: not in the evidence given"
    return missing
