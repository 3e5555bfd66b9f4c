"""The ``gpuhealth`` command. Heavy modules (rich, NVML, parsers) are imported inside commands, so
``gpuhealth --help`` and the start-up of every command stay fast.

Exit codes: 0 healthy or info only, 1 warnings, 2 critical, 3 gpuhealth itself could not run (usage errors,
unreadable or malformed input, crashes: one line on stderr; ``--debug`` adds the traceback).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuhealth import START_UP_GC_THRESHOLD, __version__
from gpuhealth.exits import EXIT_CANNOT_RUN, CannotRun
from gpuhealth.inert import one_line, visible
from gpuhealth.report.formats import FORMAT_NAMES

if TYPE_CHECKING:
    from gpuhealth.checks.registry import Expectations
    from gpuhealth.model import Report

# Commands defined in other modules, imported only when named (or listed by --help): `check` and `analyze`
# do not pay for the monitor's, the web server's or the advice commands' modules at start-up.
LAZY_COMMANDS = {
    "recommend": ("gpuhealth.advice_commands", "recommend"),
    "fix": ("gpuhealth.advice_commands", "fix"),
    # The monitor sits on top of the core; only the command line (the top layer) reaches it.
    "monitor": ("gpuhealth.monitor.commands", "monitor"),
    "usage": ("gpuhealth.monitor.commands", "usage"),
    "history": ("gpuhealth.monitor.commands", "history"),
    "watch": ("gpuhealth.monitor.commands", "watch"),
    "ack": ("gpuhealth.monitor.commands", "ack"),
    "inject": ("gpuhealth.monitor.inject", "inject_command"),
    "serve": ("gpuhealth.web.commands", "serve"),
    "fleet": ("gpuhealth.web.fleet", "fleet"),
    "config": ("gpuhealth.config_command", "config"),
}
# The built-in commands are short-lived and allocate mostly long-lived objects (modules, classes, the
# snapshot), so the collector's frequent passes find almost nothing: while one runs, a pass comes every
# START_UP_GC_THRESHOLD allocations (garbage stays bounded). The lazy commands (monitor, serve, watch...)
# may run for days: default thresholds. And the full collection Python makes as it exits is skipped
# (the memory goes back to the system anyway). Together ~4 % of `check --from`'s instructions.
# START_UP_GC_THRESHOLD (gpuhealth/__init__.py) is that threshold.
__all__ = ["START_UP_GC_THRESHOLD", "main", "run_program"]


class _Main(click.Group):
    """The root command: every failure of gpuhealth itself exits 3 with one line on stderr.

    Exit 2 means "critical" and 1 "warnings" to Slurm, NHC and scripts, so neither may come from a typo
    (click's usage errors exit 2) or from a crash (a traceback exits 1, and click turns EOFError into
    "Aborted!" with exit 1). ``--debug`` adds the traceback.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            gc.set_threshold(*self._gc_thresholds)
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            import importlib

            module, name = LAZY_COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, KeyboardInterrupt, BrokenPipeError):
            raise  # a reader that went away (`gpuhealth check | head -1`) is not a crash: main() handles it
        except Exception as exc:  # a crash, or input nothing below turned into a clear error
            if ctx.params.get("debug"):
                import traceback

                traceback.print_exc()
            raise CannotRun(_one_line(exc)) from exc

    _gc_thresholds = gc.get_threshold()
    _exit_hook = False
    _program_thresholds: tuple[int, int, int] | None = None  # the program's own, before its entry point raised them
    _reported = False  # a check or an analysis printed its report (see run_program)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if not _Main._exit_hook:
            atexit.register(gc.disable)  # runs before the interpreter's exit-time collection
            _Main._exit_hook = True
        self._gc_thresholds = self._program_thresholds or gc.get_threshold()
        gc.set_threshold(START_UP_GC_THRESHOLD, *self._gc_thresholds[1:])
        try:
            return self._main(*args, **kwargs)
        finally:  # for callers in the same process (tests); a lazy command restored them already
            if self._program_thresholds is None:
                # Not for the program (run_program), which ends here: with tens of thousands of young objects,
                # the default threshold would start a collection of them all on the way out (~3 % of `check`).
                gc.set_threshold(*self._gc_thresholds)

    def _main(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        try:
            from gpuhealth.envvars import check_environment

            check_environment()
            result = super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.UsageError as exc:
            exc.show()
            sys.exit(EXIT_CANNOT_RUN)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(EXIT_CANNOT_RUN)
        except BrokenPipeError:  # as click does: no traceback, and no second error when Python flushes stdout
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the process exits here
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


def run_program(thresholds: tuple[int, int, int]) -> None:
    """The ``gpuhealth`` program (gpuhealth.__main__.run), given the collector thresholds it started with.

    When a check or an analysis has printed its report, the process ends with ``os._exit`` once stdout and
    stderr are flushed: the interpreter's tear-down (a full collection, every module's dictionary cleared)
    is about 6 % of such a command's instructions, and frees nothing the system does not take back. Only
    when nothing else would run at exit: no exit handler besides gpuhealth's own (a temporary directory's
    cleanup, logging's flush register one), no other thread. In-process callers (tests, scripts) call
    ``main`` and never get here.
    """
    main._program_thresholds = thresholds
    try:
        main()
    except SystemExit as stop:
        if _Main._reported and (stop.code is None or isinstance(stop.code, int)) and _nothing_left_to_run():
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:  # noqa: BLE001 - leave it to the interpreter, which reports it as usual
                raise stop from None
            os._exit(stop.code or 0)
        raise


def _nothing_left_to_run() -> bool:
    """No exit handler but gpuhealth's own and no thread but this one: the tear-down would do nothing visible."""
    handlers = getattr(atexit, "_ncallbacks", None)
    threading = sys.modules.get("threading")
    return (handlers is not None and handlers() == int(_Main._exit_hook)
            and (threading is None or threading.active_count() == 1))


def _one_line(exc: BaseException, limit: int = 400) -> str:
    """The cause in one line: the file when there is one, the exception type, a bounded message."""
    if isinstance(exc, OSError) and exc.filename:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        where = ""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" (at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno})"
        text = f"internal error: {type(exc).__name__}: {exc}{where}"
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"{text}; run `gpuhealth --debug ...` for the traceback"


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuhealth")
@click.option("--debug", is_flag=True, envvar="GPUHEALTH_DEBUG",
              help="On a failure of gpuhealth itself, print the traceback too.")
def main(debug: bool) -> None:
    """Is this Linux GPU server fit for deep learning? What is wrong, the evidence, and the fix."""


def _emit(report: Report, output_format: str, verbose: bool, fix_args: tuple[str, ...] = ()) -> None:
    """Print the report in the chosen format and exit with the format's exit code. FIX_ARGS: what `gpuhealth
    fix` needs to read the same source (`--from BUNDLE`, the evidence files), for the text report's last line."""
    if output_format == "text":
        import shlex

        from gpuhealth import inert, termwidth
        from gpuhealth.report import text

        fix_command = " ".join(["gpuhealth", "fix", *map(shlex.quote, fix_args)])
        # the terminal's width; piped, unwrapped (a line per clause, for grep)
        console = inert.console(highlight=False, width=termwidth.console_width())
        text.render(report, console, verbose=verbose, fix_command=fix_command)
        _Main._reported = True
        sys.exit(report.exit_code)
    from gpuhealth.report.formats import render

    output, exit_code = render(output_format, report)
    if output:  # a healthy node prints nothing in the scheduler formats
        click.echo(output, nl=not output.endswith("\n"))
    _Main._reported = True
    sys.exit(exit_code)


def _expectations(config: Path | None, gpu_count: int | None) -> Expectations:
    """The [check] section of gpuhealth's configuration (defaults, system and user files, ``config``);
    ``--gpu-count`` over all of them."""
    from gpuhealth.config import load

    try:
        settings = load(config, check_only=True)
        if gpu_count is not None:
            settings.set_flag("check.gpu_count", gpu_count, "--gpu-count")
        return settings.expectations()
    except ValueError as exc:
        raise CannotRun(str(exc)) from exc


format_option = click.option("--format", "output_format", type=click.Choice(FORMAT_NAMES), default="text",
                             show_default=True, help="Report format.")
config_option = click.option("--config", type=click.Path(path_type=Path, dir_okay=False),
                             help="gpuhealth's config file (TOML; its [check] section: what this host should have), "
                                  "over /etc/gpuhealth/config.toml and ~/.config/gpuhealth/config.toml.")
timeout_option = click.option("--timeout", type=float, default=10.0, show_default=True,
                              help="Seconds before a command (nvidia-smi, dmesg) counts as hung.")


@main.command()
@click.option("--from", "source", type=click.Path(exists=True, path_type=Path),
              help="Check a captured bundle (directory or .tar.gz) instead of this host.")
@format_option
@config_option
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
              help="Seconds before a command counts as hung [default: 10, the PyTorch probe 60]. Given, it bounds "
                   "every command, the probe included.")
@click.option("--gpu-count", type=int, help="Number of GPUs this host should have.")
@click.option("--gpu-state", type=click.Path(dir_okay=False, path_type=Path),
              help="Remember in FILE how many GPUs are on the PCI bus; none where FILE saw some is critical "
                   "(GPUs that vanished). The Slurm wrapper uses /var/lib/gpuhealth/gpus-seen.")
@click.option("-v", "--verbose", is_flag=True, help="Explain why each finding matters.")
@click.option("--save", type=click.Path(file_okay=False, path_type=Path),
              help="Also keep this run (snapshot and findings) in DIR, for `gpuhealth diff`.")
@click.option("--keep-runs", type=click.IntRange(min=0), default=30, show_default=True, metavar="N",
              help="With --save: keep the newest N runs in DIR and remove older ones (0 keeps all).")
@click.option("--no-frameworks", is_flag=True,
              help="Do not run the PyTorch probe (it computes briefly on every GPU).")
@click.option("--level", type=click.IntRange(1, 2), default=1, show_default=True,
              help="2 adds active tests: copy bandwidth, a matmul and a memory pattern on every idle GPU.")
@click.option("--budget", type=float, default=60.0, show_default=True, help="Seconds the active tests may take.")
@click.option("--force", is_flag=True, help="Run the active tests even on busy GPUs.")
@click.option("--stage", type=click.Choice(["preinstall", "postinstall"]),
              help="Only the checks for before or after the driver install (default: what applies).")
def check(source: Path | None, output_format: str, config: Path | None, timeout: float | None,
          gpu_count: int | None, gpu_state: Path | None, verbose: bool, save: Path | None, keep_runs: int,
          no_frameworks: bool, level: int, budget: float, force: bool, stage: str | None) -> None:
    """Check this host (or a bundle captured with `gpuhealth snapshot`)."""
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.collect import DEFAULT_TIMEOUT_S, collect

    expect = _expectations(config, gpu_count)
    seen = None
    if gpu_state is not None:
        from gpuhealth import gpustate

        seen = gpustate.read(gpu_state)
        if seen is not None:
            from dataclasses import replace

            expect = replace(expect, gpus_last_seen=seen.count, gpus_last_seen_at=seen.seen_at,
                             gpus_last_seen_in=str(gpu_state))
    command_timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
    if source is None:
        from gpuhealth.host import LocalHost
        from gpuhealth.progress import describe, live_steps

        local = LocalHost(nvml_timeout=command_timeout)  # NVML's probe too is bounded by --timeout
        with live_steps() as step:  # a spinner on a terminal once a step takes over a second; nothing piped
            snapshot = collect(local, command_timeout, frameworks=not no_frameworks, probe_timeout=timeout,
                               waiting=lambda probe: step(describe(probe)), ib_exclude=expect.ib_exclude)
            if level >= 2:
                step(f"running the active tests on every idle GPU (up to {budget:g} s)")
            snapshot = _with_level(local, snapshot, level, budget, force)
    else:
        from gpuhealth.advice_commands import open_bundle

        with open_bundle(source) as host:
            snapshot = _with_level(host, collect(host, command_timeout, origin="bundle",
                                                 captured_at=host.captured_at), level, budget, force)
    from gpuhealth.checks.stages import codes_for

    report = run_checks(snapshot, expect, select=codes_for(stage))
    if gpu_state is not None and snapshot.pci_devices is not None:
        from gpuhealth import gpustate

        # only GPUs seen are remembered: a bus without them keeps the memory of those the host had
        gpustate.remember(gpu_state, len(snapshot.nvidia_pci_gpus), snapshot.captured_at or "")
    if save is not None:
        from gpuhealth.drift import save_run

        try:
            save_run(report, save, keep_runs)
        except OSError as exc:
            raise CannotRun(f"{exc.filename or save}: {exc.strerror or exc}") from exc
    _emit(report, output_format, verbose, () if source is None else ("--from", str(source)))


def _with_level(host: Any, snapshot: Any, level: int, budget: float, force: bool) -> Any:
    """Level 2 adds the active tests (recorded through the host like any other command)."""
    if level < 2:
        return snapshot
    from gpuhealth.active import with_active_tests

    return with_active_tests(host, snapshot, budget, force)


@main.command()
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Bundle to write: a directory, or a .tar.gz archive when the name ends so.")
@click.option("--redact-host", is_flag=True,
              help="Replace hostname, serial numbers, UUIDs, IP and MAC addresses and user names with placeholders.")
@timeout_option
def snapshot(output: Path, redact_host: bool, timeout: float) -> None:
    """Capture this host's evidence into a bundle that `check --from` and others can replay."""
    import shutil
    import tempfile

    from gpuhealth import inert
    from gpuhealth.bundle import RecordingHost, write_archive
    from gpuhealth.collect import collect
    from gpuhealth.host import LocalHost

    archive = output.name.endswith(".tar.gz")
    if output.exists() and (archive or any(output.iterdir())):
        raise CannotRun(f"{output}: already exists; choose a new path")
    work = Path(tempfile.mkdtemp(prefix="gpuhealth-snapshot-")) if archive else output
    console = inert.console(stderr=True)
    try:
        recorder = RecordingHost(LocalHost(), work, hostname=LocalHost.hostname())
        with console.status("collecting evidence", spinner="dots") as status:
            # devices that must not be read ([check] ib_exclude) stay out of the bundle too
            collect(recorder, timeout, progress=lambda name: status.update(f"collected {name}"),
                    ib_exclude=_expectations(None, None).ib_exclude)
            recorder.finish(redact_host=redact_host)
        if archive:
            write_archive(work, output)
    except OSError as exc:
        raise CannotRun(f"{exc.filename or output}: {exc.strerror or exc}") from exc
    finally:
        if archive:
            shutil.rmtree(work, ignore_errors=True)
    console.print(f"bundle written to {output}" + (" (host identifiers redacted)" if redact_host else ""))


@main.command()
@click.argument("files", nargs=-1, required=True)
@format_option
@config_option
@click.option("-v", "--verbose", is_flag=True, help="Explain why each finding matters; list what each file was.")
@click.option("--max-bytes", default="4G", show_default=True,
              help="Refuse an input larger than this (bytes, or with K, M, G; gzip counts decompressed).")
@click.option("--open-timeout", type=float, default=10.0, show_default=True,
              help="Seconds a FIFO may take to deliver data before it is given up.")
def analyze(files: tuple[str, ...], output_format: str, config: Path | None, verbose: bool, max_bytes: str,
            open_timeout: float) -> None:
    """Analyse pasted or attached evidence: FILE... or - for standard input.

    Recognises nvidia-bug-report.log(.gz), kernel logs, nvidia-smi outputs, lspci,
    /proc/driver/nvidia/version, PyTorch collect_env and training logs. Large kernel logs are
    scanned as a stream, in bounded memory (docs/limits.md).
    """
    from gpuhealth.evidence_input import InputError, parse_max_bytes, read_evidence

    try:
        limit = parse_max_bytes(max_bytes)
    except ValueError as exc:
        raise CannotRun(f"--max-bytes: {exc}") from exc
    texts = []
    for name in files:
        try:
            evidence = read_evidence(name, limit, open_timeout)
        except InputError as exc:
            raise CannotRun(str(exc)) from exc
        if verbose and evidence.note:
            _note(f"{evidence.name}: {evidence.note}")
        texts.append((evidence.name, evidence.content))
    from gpuhealth.analyze import analyze_texts
    from gpuhealth.checks.engine import run_checks

    snapshot, recognised = analyze_texts(texts)
    if verbose and output_format == "text":
        for item in recognised:
            note = f"  {item.note}" if item.note else ""
            _note(f"{item.piece}: {item.kind or 'not recognised'}{note}")
    _emit(run_checks(snapshot, _expectations(config, None)), output_format, verbose, files)


def _note(line: str) -> None:
    """One line -v says on stderr, wrapped to the terminal (termwidth imported only here: its shutil brings zlib)."""
    from gpuhealth import termwidth

    click.echo(termwidth.fitted(one_line(line)), err=True)


@main.command(name="diff")
@click.argument("runs", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--latest", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Compare the two most recent runs saved in DIR by `check --save DIR`.")
def diff_command(runs: tuple[Path, ...], latest: Path | None) -> None:
    """What changed between two runs: BEFORE AFTER, each a bundle or a saved run.

    Driver or kernel changed, a GPU vanished, new Xids, ECC counters increased, PCIe width changed,
    new and resolved findings. Exit 1 when something got worse, 0 otherwise.
    """
    from gpuhealth.drift import diff, latest_runs, render

    if latest is not None:
        runs = tuple(latest_runs(latest))
        if len(runs) < 2:
            click.echo(f"{latest}: fewer than two saved runs; nothing to compare yet")
            return
    if len(runs) != 2:
        raise CannotRun("give two runs (BEFORE AFTER) or --latest DIR")
    changes = diff(_load_run(runs[0]), _load_run(runs[1]))
    click.echo(one_line(f"{runs[0]} -> {runs[1]}"))
    click.echo(visible(render(changes)), nl=False)  # versions, GPU names and Xids come from the bundles
    sys.exit(1 if any(c.worse for c in changes) else 0)


def _load_run(path: Path):  # -> drift.Run
    from gpuhealth.advice_commands import open_bundle
    from gpuhealth.bundle import is_bundle
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.collect import collect
    from gpuhealth.drift import load_run, run_of
    from gpuhealth.model import ParseError

    if not is_bundle(path):
        try:
            return load_run(path)
        except ParseError as exc:
            raise CannotRun(str(exc)) from exc
    with open_bundle(path) as host:
        return run_of(run_checks(collect(host, origin="bundle", captured_at=host.captured_at)))


@main.command(name="checks")
def list_checks() -> None:
    """List every check with its code and slug."""
    import textwrap

    from gpuhealth import termwidth
    from gpuhealth.checks import catalogue
    from gpuhealth.checks.registry import REGISTRY

    catalogue.load()
    width = termwidth.columns()  # a title wraps under itself on a terminal; piped, each check is one line
    area = None
    for spec in sorted(REGISTRY.values(), key=lambda s: s.code):
        if spec.area != area:
            area = spec.area
            click.echo(f"\n{area}")
        line = f"  {spec.code}  {spec.slug:28} {spec.title}"
        lead = line[:len(line) - len(spec.title)]
        if width is None or len(line) <= width or width - len(lead) < 20:
            click.echo(line)
        else:
            click.echo("\n".join(textwrap.wrap(spec.title, width, initial_indent=lead,
                                               subsequent_indent=" " * len(lead), break_on_hyphens=False)))


@main.command()
@click.argument("words", nargs=-1, required=True)
def explain(words: tuple[str, ...]) -> None:
    """Explain a check (GH206, nouveau-loaded) or an Xid (79, xid 79): what it means and what to do."""
    from gpuhealth.checks import catalogue
    from gpuhealth.checks.registry import DOC_SECTIONS, find

    text = " ".join(words).strip()
    xid = _xid_number(text)
    if xid is not None:
        _explain_xid(xid)
        return
    catalogue.load()
    spec = find(text)
    if spec is None:
        raise CannotRun(f"no check {text!r}; `gpuhealth checks` lists them (an Xid: `gpuhealth explain xid 79`)")
    click.echo(f"{spec.code} {spec.slug}: {spec.title}\n")
    from gpuhealth.checks.docgen import fix_lines

    for section in DOC_SECTIONS:
        click.echo(f"{section}:\n{spec.docs[section]}\n")
        if section == "How to fix" and (fixes := fix_lines(spec.code)):
            click.echo("\n".join(fixes))


def _xid_number(text: str) -> int | None:
    """``79``, ``xid 79``, ``Xid79``, ``xid-79`` -> 79; None for anything else (a check code or slug)."""
    import re

    match = re.fullmatch(r"(?i)(?:xid[\s:_-]*)?(\d{1,3})", text)
    return int(match[1]) if match else None


def _explain_xid(code: int) -> None:
    from gpuhealth.knowledge import xid as xids
    from gpuhealth.knowledge.sources import document, keys_in

    info = xids.lookup(code)
    if info is None:
        raise CannotRun(f"Xid {code} is not in the Xid catalogue (codes 1-{max(x.xid for x in xids.all_xids())})")
    click.echo(f"Xid {info.xid} {info.mnemonic}\n")
    rows = [("Meaning", info.meaning), ("Likely cause", info.cause_class),
            ("What to do now", xids.action_in_words(info.immediate_action)),
            ("To investigate", xids.action_in_words(info.investigatory_action) if info.investigatory_action else ""),
            ("Severity here", info.severity.value + (" (usually the application's fault)" if info.application_class
                                                      else "")),
            ("In use", "yes" if info.in_use else "unused on Ampere and newer (may appear on Volta or older GPUs)"),
            ("Checked by", "GH302 gpu-fallen-off-bus" if code == 79 else "GH301 xid-errors")]
    for label, value in rows:
        if value:
            click.echo(f"{label + ':':16}{value}")
    click.echo("Sources:")
    for key in keys_in(info.source):
        click.echo(f"  {document(key)}")


if __name__ == "__main__":  # pragma: no cover
    main()
