"""The ``recommend`` and ``fix`` commands. ``cli.py`` adds them to the ``gpuhealth`` group.

Like ``check``, both collect from this host (or replay a bundle with ``--from``); like ``analyze``, both
also take pasted evidence (``FILE...`` or ``-``). Heavy modules are imported inside the commands so
importing this module costs only click.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuhealth.exits import CannotRun

if TYPE_CHECKING:
    from gpuhealth.bundle import BundleHost
    from gpuhealth.model import Snapshot

TIMEOUT_S = 10.0


def _snapshot(source: Path | None, files: tuple[str, ...] = ()) -> Snapshot:
    """This host; or a bundle (``--from``); or pasted evidence (``FILE...``, ``-`` for standard input)."""
    if files:
        if source is not None:
            raise CannotRun("give a bundle (--from) or evidence files, not both")
        return _evidence(files)
    from gpuhealth.collect import collect

    if source is None:
        from gpuhealth.config import load
        from gpuhealth.host import LocalHost

        try:  # devices that must not be read ([check] ib_exclude) stay unread here too
            exclude = load(None, check_only=True).expectations().ib_exclude
        except ValueError as exc:
            raise CannotRun(str(exc)) from exc
        return collect(LocalHost(), TIMEOUT_S, ib_exclude=exclude)
    with open_bundle(source) as host:
        return collect(host, TIMEOUT_S, origin="bundle", captured_at=host.captured_at)


@contextlib.contextmanager
def open_bundle(source: Path) -> Iterator[BundleHost]:
    """A bundle given to ``--from``, closed after use. CannotRun (exit 3, one line) for a log given instead
    (saying what to use) and for an archive the bundle reader refuses."""
    from gpuhealth.bundle import BundleError, BundleHost

    if is_plain_file(source):  # a log given to --from: say what to use instead of the archive error
        raise CannotRun(not_a_bundle(source))
    try:
        host = BundleHost(source)
    except BundleError as exc:
        raise CannotRun(str(exc)) from exc
    try:
        yield host
    finally:
        host.close()


def is_plain_file(path: Path) -> bool:
    """A file that is no archive at all (a log, a command's output): no compression magic, no tar header.

    Archives, even broken or hostile ones, go on to the bundle reader, which says what is wrong with them.
    """
    if not path.is_file() or re.search(r"\.(?:tgz|tar(?:\.\w+)?)$", path.name):
        return False  # named as an archive: the bundle reader says what is wrong with it
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    compressed = head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd"))
    return not compressed and head[257:262] != b"ustar"


def not_a_bundle(path: Path) -> str:
    """The one line for ``--from`` given a log or a command's output instead of a bundle."""
    return (f"{path}: not a gpuhealth bundle (a directory with manifest.json, or a .tar.gz from "
            f"`gpuhealth snapshot`); for a log or a command's output use `gpuhealth analyze {path}`")


def _evidence(files: tuple[str, ...]) -> Snapshot:
    """The snapshot ``analyze`` builds from the same files, read by the reader ``analyze`` uses (its limits: a
    device, a directory or a socket is refused, a FIFO must deliver, a large kernel log is streamed), so an input
    ``analyze`` cannot read is exit 3 here too, with the same line naming it and why."""
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.evidence_input import InputError, read_evidence

    texts = []
    for name in files:
        try:
            evidence = read_evidence(name)
        except InputError as exc:
            raise CannotRun(str(exc)) from exc
        texts.append((evidence.name, evidence.content))
    return analyze_texts(texts)[0]


def _planned(models: tuple[str, ...], os_name: str | None, base: Snapshot | None) -> Snapshot:
    """A snapshot for hardware that has not arrived: one PCI device per ``--gpu``, the OS from ``--os``."""
    import datetime
    import re
    from dataclasses import replace

    from gpuhealth.knowledge.gpus import device_id_for, name_for
    from gpuhealth.model import PciDevice, Snapshot

    # the planning date decides which branches are past their end of life
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")
    snapshot = base or Snapshot(origin="plan", captured_at=today)
    if models:
        devices = []
        for number, text in enumerate(models, start=1):
            device_id, candidates = device_id_for(text)
            if device_id is None:
                hint = f": did you mean {' or '.join(repr(c) for c in candidates)}?" if candidates else (
                    ": give its PCI ID (10de:XXXX, from lspci -nn) or a name from `nvidia-smi -L`")
                raise CannotRun(f"--gpu {text!r}: not a known GPU model{hint}")
            # the model as the user named it (a bare PCI ID: the name table's name), never its PCI ID
            name = None if re.fullmatch(r"(?i)(?:10de:|0x)?[0-9a-f]{4}", text.strip()) else text.strip()
            devices.append(PciDevice(f"0000:{number:02x}:00.0", "10de", device_id, "0302",
                                     name=name or name_for(device_id)))
        snapshot = replace(snapshot, pci_devices=tuple(devices), smi=None, nvml=None)
    if os_name:
        snapshot = replace(snapshot, os=_os_info(os_name))
    return snapshot


def _os_info(text: str):  # -> OsInfo
    """``ubuntu-22.04``, ``rhel-9``, ``rocky-9.3``, ``debian-12`` -> the OsInfo os-release would give."""
    import re

    from gpuhealth.model import OsInfo

    match = re.fullmatch(r"(?i)([a-z]+)[-_ ]?(\d+(?:\.\d+)?)?", text.strip())
    if not match:
        raise CannotRun(f"--os {text!r}: give a distribution and version such as ubuntu-22.04 or rhel-9")
    os_id, version = match[1].lower(), match[2]
    like = {"ubuntu": ("debian",), "rocky": ("rhel", "centos", "fedora"), "almalinux": ("rhel", "centos", "fedora"),
            "centos": ("rhel", "fedora"), "rhel": ("fedora",), "ol": ("fedora",)}.get(os_id, ())
    names = {"ubuntu": "Ubuntu", "debian": "Debian", "rhel": "Red Hat Enterprise Linux", "rocky": "Rocky Linux",
             "almalinux": "AlmaLinux", "centos": "CentOS Linux", "ol": "Oracle Linux", "fedora": "Fedora Linux"}
    pretty = " ".join(x for x in (names.get(os_id, os_id), version) if x)
    return OsInfo(id=os_id, id_like=like, version_id=version, pretty_name=pretty, architecture="x86_64")


from_option = click.option("--from", "source", type=click.Path(exists=True, path_type=Path),
                           help="Use a captured bundle (directory or .tar.gz) instead of this host.")
evidence_argument = click.argument("files", nargs=-1)


@click.command()
@evidence_argument
@from_option
@click.option("--gpu", "models", multiple=True,
              help="Plan for a GPU not installed yet: a PCI ID (10de:2330) or a model name (\"H100 80GB HBM3\"). "
                   "Repeat for several.")
@click.option("--os", "os_name", help="Plan for this distribution: ubuntu-22.04, debian-12, rhel-9, rocky-9 ...")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
def recommend(files: tuple[str, ...], source: Path | None, models: tuple[str, ...], os_name: str | None,
              output_format: str) -> None:
    """Recommend a driver branch, kernel-module flavour, install commands, CUDA and PyTorch wheel.

    For this host; a bundle (--from); pasted evidence such as an lspci output (FILE... or - for
    standard input); or, with --gpu and --os, for hardware that has not arrived yet.
    """
    from gpuhealth.recommend import recommend as advise
    from gpuhealth.recommend import render_text, to_json

    if models or os_name:
        base = _snapshot(source, files) if (files or source) else None
        snapshot = _planned(models, os_name, base)
    else:
        snapshot = _snapshot(source, files)
    if not snapshot.captured_at:  # pasted evidence without a date: end of life is judged as of today
        import datetime
        from dataclasses import replace

        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")
        snapshot = replace(snapshot, captured_at=today)
    result = advise(snapshot)
    if output_format == "json":
        click.echo(to_json(result), nl=False)
        return
    from gpuhealth import inert, termwidth

    # Words and the table fit the terminal (piped: unwrapped); commands are printed with soft_wrap, never wrapped,
    # so they stay pasteable. render_text escapes what it puts into its markup.
    render_text(result, inert.console(highlight=False, markup=True, width=termwidth.console_width()))


@click.command()
@evidence_argument
@from_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the script to FILE (mode 0755) instead of printing it.")
def fix(files: tuple[str, ...], source: Path | None, output: Path | None) -> None:
    """Write the findings' fixes as one ordered bash script to review (it is never run).

    For this host, a bundle (--from), or pasted evidence (FILE... or - for standard input).
    """
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.fixscript import fix_script

    evidence = (", ".join("standard input" if f == "-" else f for f in files) if files
                else f"the bundle {source}" if source is not None else "this host, checked live")
    script = fix_script(run_checks(_snapshot(source, files)), evidence)
    if output is None:
        click.echo(script, nl=False)
        return
    from gpuhealth.safefile import write_file

    try:
        write_file(output, script, 0o755)  # never through a planted link, never into another user's file
    except OSError as exc:
        raise CannotRun(f"{output}: {exc.strerror or exc}") from exc
    click.echo(f"fix script written to {output}; review it, then run it yourself", err=True)
