"""What keeps `check --from` and `analyze` quick to start (README, Performance; bench/check_from_bundle.py).

A replayed bundle is probed without threads and without the live host's machinery; the bundle's cheaper
containment check still refuses every way out of the bundle; and the heavy modules a command does not
use stay unimported (a regression here is a slower start-up, which no other test would notice).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuhealth
from conftest import CORPUS, REPO
from gpuhealth.bundle import BundleHost, RecordingHost, extract_archive
from gpuhealth.collect import collect
from gpuhealth.knowledge import gpu_expectations, xid
from gpuhealth.lazyre import GUARDED, GuardedPattern, has, has_folded
from hostcases import FakeHost, load_spec

EXAMPLE = REPO / "examples" / "h100x8-xid-ecc.tar.gz"


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped 8-GPU example bundle, unpacked: `check --from DIR` reads no archive."""
    where = tmp_path_factory.mktemp("example")
    extract_archive(EXAMPLE, where)
    found = next(p.parent for p in where.rglob("manifest.json"))
    return found


def _modules_after(argv: list[str]) -> set[str]:
    code = ("import sys, json\n"
            "from gpuhealth.cli import main\n"
            f"sys.argv = {['gpuhealth', *argv]!r}\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stderr.rsplit("MODULES ", 1)[1]))


# Modules a replay or an analysis of files needs none of: the live host's (processes, sockets), thread
# pools, archives, XML (these bundles hold no XML), pickling (the parallel scanner of huge logs), and the
# resource loader (the knowledge tables are read as files), hashing (OpenSSL: a long command's key is read
# from the manifest) and gzip (none of this evidence is compressed). This replay also needs no textwrap or
# shlex: the example holds no lspci listing (parsing one imports textwrap) and `analyze`'s parsers use both.
NOT_NEEDED_BY_REPLAY = {"textwrap", "shlex"}
# Nor does an analysis of an `nvidia-smi -q` and a kernel log need the parsers of other evidence kinds (each kind
# imports its parser when it parses a piece), nor shlex (only an `lsmod | grep` piece is split like a shell).
NOT_NEEDED_BY_ANALYZE = {"shlex", "textwrap", "gpuhealth.parsers.lspci", "gpuhealth.parsers.torch_env",
                         "gpuhealth.parsers.smi_table", "gpuhealth.parsers.smi_csv", "gpuhealth.parsers.app_log",
                         "gpuhealth.parsers.environ", "gpuhealth.parsers.services", "gpuhealth.parsers.cuda",
                         "pkgutil"}
NOT_NEEDED = {"subprocess", "socket", "selectors", "concurrent.futures", "tarfile", "tempfile", "zipfile",
              "hashlib", "_hashlib", "gzip", "zlib", "select",
              "importlib.resources", "xml.etree.ElementTree", "pickle", "rich", "pynvml", "torch",
              "gpuhealth.monitor.commands", "gpuhealth.web.commands", "gpuhealth.web.fleet"}


@pytest.fixture(scope="module")
def framework() -> set[str]:
    """What importing click loads (on Python 3.10 that includes subprocess): not ours to trim."""
    code = "import sys, json, click; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(out.stdout))


def test_check_from_a_bundle_directory_imports_only_what_it_uses(bundle_dir: Path, framework: set[str]):
    loaded = _modules_after(["check", "--from", str(bundle_dir), "--format", "json"])
    assert "gpuhealth.checks.engine" in loaded and "gpuhealth.bundle" in loaded  # it did run
    extra = ((NOT_NEEDED | NOT_NEEDED_BY_REPLAY) & loaded) - framework
    assert not extra, sorted(extra)


def test_analyze_of_files_imports_only_what_it_uses(bundle_dir: Path, framework: set[str]):
    smi = next(p for p in (bundle_dir / "commands").glob("nvidia-smi_-q.stdout"))
    dmesg = next((bundle_dir / "commands").glob("dmesg*.stdout"))
    loaded = _modules_after(["analyze", str(smi), str(dmesg), "--format", "json"])
    assert "gpuhealth.analyze" in loaded
    extra = ((NOT_NEEDED | NOT_NEEDED_BY_ANALYZE) & loaded) - framework
    assert not extra, sorted(extra)


# `gpuhealth --help` imports every lazy command's module for its one line of help: those modules must stay light.
# Before: `inject` brought the trace sources (signal, tempfile, random, the model), the monitor's config brought
# importlib.resources, `fleet` the model and the action table: 306 M instructions against 233 M before them.
NOT_NEEDED_BY_HELP = {"gpuhealth.model", "gpuhealth.monitor.sources", "gpuhealth.monitor.sample",
                      "gpuhealth.knowledge.actions", "gpuhealth.checks.engine", "gpuhealth.collect", "string"}


def test_help_imports_none_of_the_commands_machinery(framework: set[str]):
    loaded = _modules_after(["--help"])
    assert "gpuhealth.monitor.inject" in loaded and "gpuhealth.web.fleet" in loaded  # it listed the lazy commands
    extra = (NOT_NEEDED_BY_HELP & loaded) - framework
    assert not extra, sorted(extra)


def test_check_from_a_bundle_imports_no_string_module(bundle_dir: Path, framework: set[str]):
    """`string` builds string.Template (a regex compiled at import): redaction needs only two constants of it."""
    assert "string" not in _modules_after(["check", "--from", str(bundle_dir), "--format", "json"]) - framework


def record_bundle(out: Path) -> None:
    """A bundle of the healthy 8x H100 test host, written to ``out``."""
    recorder = RecordingHost(FakeHost(load_spec("h100x8-healthy")), out)
    collect(recorder)
    recorder.finish()


def test_a_bundle_is_probed_without_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    record_bundle(tmp_path / "b")
    import threading

    started: list[str] = []
    original = threading.Thread.start

    def counting(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", counting)
    snapshot = collect(BundleHost(tmp_path / "b"), origin="bundle")
    assert snapshot.gpus and not started, started


def test_a_linked_directory_in_a_bundle_cannot_lead_out(tmp_path: Path):
    record_bundle(tmp_path / "b")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "modules").write_text("secret 1 0 - Live 0x0\n")
    proc = tmp_path / "b" / "root" / "proc"
    moved = tmp_path / "proc-moved"
    proc.rename(moved)
    proc.symlink_to(outside, target_is_directory=True)  # root/proc -> a directory outside the bundle
    host = BundleHost(tmp_path / "b")
    content = host.read("/proc/modules")
    assert content.data is None and "leaves the bundle" in (content.error or "")
    missing = host.read("/proc/no/such/file")
    assert missing.data is None and missing.error  # a missing file below the link: refused or not captured


def test_a_link_to_a_sibling_whose_name_extends_the_bundles_cannot_lead_out(tmp_path: Path):
    """The containment check compares path strings: "/x/b-other" is not below "/x/b"."""
    record_bundle(tmp_path / "b")
    sibling = tmp_path / "b-other"
    sibling.mkdir()
    (sibling / "modules").write_text("secret 1 0 - Live 0x0\n")
    modules = tmp_path / "b" / "root" / "proc" / "modules"
    modules.unlink()
    modules.symlink_to(sibling / "modules")
    (tmp_path / "b" / "commands" / "nvidia-smi_-q.stdout").unlink()
    (tmp_path / "b" / "commands" / "nvidia-smi_-q.stdout").symlink_to(sibling / "modules")
    host = BundleHost(tmp_path / "b")
    content = host.read("/proc/modules")
    assert content.data is None and "leaves the bundle" in (content.error or "")
    assert host.run(["nvidia-smi", "-q"]).stdout == ""
    assert host.stdout_file(["nvidia-smi", "-q"])[1] is None


def test_reads_inside_the_bundle_still_work_and_missing_files_say_so(tmp_path: Path):
    record_bundle(tmp_path / "b")
    host = BundleHost(tmp_path / "b")
    assert host.read("/proc/modules").data
    assert host.read("/etc/never-captured").error == "not captured in this bundle"
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["commands"]


def test_a_long_command_replays_under_its_recorded_key(bundle_dir: Path):
    """A long command line's key ends in a hash; a replay takes it from the manifest (no hashlib) and
    must find exactly what command_key finds."""
    from gpuhealth.bundle import command_key

    host = BundleHost(bundle_dir)
    long_ones = [c for c in host.manifest["commands"] if len(" ".join(c["argv"])) > 80]
    assert long_ones  # the example holds two: dpkg-query and the python3 probe
    for entry in long_ones:
        assert host._key(entry["argv"]) == command_key(entry["argv"]) == entry["key"]
        run = host.run(entry["argv"])
        stdout = bundle_dir / "commands" / f"{entry['key']}.stdout"
        assert run.stdout == (stdout.read_text(errors="replace") if stdout.exists() else "")
    # A recorded key of the wrong form is not trusted: the key is computed.
    entry = long_ones[0]
    host._recorded_keys[tuple(entry["argv"])] = "elsewhere"
    assert host._key(entry["argv"]) == command_key(entry["argv"])
    assert host._key(["nvidia-smi", "-q"]) == command_key(["nvidia-smi", "-q"]) == "nvidia-smi_-q"


def test_short_commands_collect_garbage_rarely_and_restore_the_thresholds():
    import gc

    import click
    from click.testing import CliRunner

    from gpuhealth.cli import START_UP_GC_THRESHOLD, main

    seen = []
    before = gc.get_threshold()

    @click.command()
    def probe() -> None:
        seen.append(gc.get_threshold())

    main.add_command(probe, "zz-probe")
    try:
        result = CliRunner().invoke(main, ["zz-probe"])
    finally:
        main.commands.pop("zz-probe")
    assert result.exit_code == 0, result.output
    assert seen == [(START_UP_GC_THRESHOLD, *before[1:])]
    assert gc.get_threshold() == before
    # A long-lived command (monitor, serve...) runs with the thresholds it was started with.
    main._gc_thresholds = before
    gc.set_threshold(START_UP_GC_THRESHOLD, *before[1:])
    try:
        assert main.get_command(click.Context(main), "monitor") is not None
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)


# --------------------------------------------------------------------------- guarded patterns (lazyre.guarded_re)

def _every_guarded_pattern() -> list[GuardedPattern]:
    for name in sorted(m.name for m in pkgutil.walk_packages(gpuhealth.__path__, "gpuhealth.")
                       if not m.name.endswith("__main__")):
        importlib.import_module(name)
    gpu_expectations.table()  # its plain-text rows are guarded when the table is read
    found = list(GUARDED)
    from gpuhealth.parsers import kernel_log

    for may, name in kernel_log.LINE_GUARDS:  # guards written inline in front of the line forms' patterns
        pattern = getattr(kernel_log, name)
        found.append(GuardedPattern(pattern.pattern, pattern.flags, may, at_start=True))
        GUARDED.remove(found[-1])
    return found


GUARDED_PATTERNS = _every_guarded_pattern()


def _corpus_texts() -> list[str]:
    """Real text to try the guards on: every corpus file's head (the sniffers look at heads)."""
    texts = []
    for path in sorted(p for p in CORPUS.rglob("*") if p.is_file()):
        data = path.read_bytes()[:65536]
        if b"\x00" not in data:
            texts.append(data.decode("utf-8", "replace"))
    return texts


@pytest.fixture(scope="module")
def corpus_texts() -> list[str]:
    return _corpus_texts()


def test_the_package_guards_its_sniffing_patterns():
    assert len(GUARDED_PATTERNS) >= 50  # not vacuous: the evidence kinds, the line facts, the log forms
    assert all(isinstance(p, GuardedPattern) and callable(p.may) for p in GUARDED_PATTERNS)


def test_every_guard_passes_every_real_text_and_line_its_pattern_matches(corpus_texts: list[str]):
    """A guard must be a necessary condition: the pattern finds nothing in a text the guard refuses."""
    checked = 0
    for text in corpus_texts:
        pieces = [text, *text.splitlines(), *(line.strip() for line in text.splitlines())]
        for pattern in GUARDED_PATTERNS:
            for piece in pieces:
                if (pattern.compiled.match if pattern.at_start else pattern.compiled.search)(piece) is not None:
                    assert pattern.may(piece), (pattern, piece[:200])
                    checked += 1
    assert checked > 1000


@pytest.mark.parametrize("pattern", GUARDED_PATTERNS, ids=lambda p: p.pattern[:50])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_guard_passes_strings_its_pattern_matches(pattern: GuardedPattern, data: st.DataObject):
    text = data.draw(st.from_regex(pattern.compiled))
    if pattern.at_start:  # a match at the start: what it matched, with text after it
        found = pattern.compiled.search(text)
        text = text[found.start():] if found else text
    # from_regex can overshoot lookarounds: only real matches count
    if (pattern.compiled.match if pattern.at_start else pattern.compiled.search)(text) is not None:
        assert pattern.may(text), (pattern, text)


def test_a_guarded_pattern_answers_as_the_compiled_one_and_compiles_only_when_asked():
    pattern = GuardedPattern(r"^\s*Link \d+: (?P<rest>.*)", re.M, has("Link "))
    GUARDED.remove(pattern)  # a test's own pattern is not the package's
    real = re.compile(r"^\s*Link \d+: (?P<rest>.*)", re.M)
    assert pattern.search("no links here") is None and "_compiled" not in pattern.__dict__
    assert pattern.findall("nothing") == [] and list(pattern.finditer("nothing")) == []
    assert "_compiled" not in pattern.__dict__
    text = "GPU 0\n  Link 0: 26.562 GB/s\n  Link 1: <inactive>"
    for method in ("search", "match", "fullmatch", "findall"):
        got, want = getattr(pattern, method)(text), getattr(real, method)(text)
        assert (got.span() if isinstance(got, re.Match) else got) == (want.span() if isinstance(want, re.Match)
                                                                        else want)
    assert [m.group() for m in pattern.finditer(text)] == [m.group() for m in real.finditer(text)]
    assert pattern.search(text, 10).span() == real.search(text, 10).span()  # a position skips the guard
    assert has_folded("nvlink")("NVLINK") and has_folded("nvlink")("nvlin\u212a") and not has_folded("nvlink")("x")
    with pytest.raises(ValueError):
        has_folded("NVLink")


def test_analyzing_a_kernel_log_compiles_no_sniffing_pattern_of_other_kinds(bundle_dir: Path):
    """Every kind above the kernel log sniffs it; their guarded patterns stay uncompiled (the start-up gain)."""
    smi = next(p for p in (bundle_dir / "commands").glob("nvidia-smi_-q.stdout"))
    dmesg = next((bundle_dir / "commands").glob("dmesg*.stdout"))
    code = ("import sys, json\n"
            "from gpuhealth.cli import main\n"
            "from gpuhealth.lazyre import GUARDED\n"
            f"sys.argv = ['gpuhealth', 'analyze', {str(smi)!r}, {str(dmesg)!r}, '--format', 'json']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\nCOMPILED ' + json.dumps([p.pattern for p in GUARDED if '_compiled' in vars(p)]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    compiled = json.loads(out.stderr.rsplit("COMPILED ", 1)[1])
    from gpuhealth.evidence import builtin, listings

    sniffers = {v.pattern for module in (builtin, listings) for v in vars(module).values()
                if isinstance(v, GuardedPattern)}
    assert len(sniffers) >= 30
    assert not sniffers & set(compiled), sorted(sniffers & set(compiled))


@pytest.mark.parametrize("text", ["GH101", "GH999", "GH000", "GH10", "GH1000", "gh101", "GH1a1", "GH\u0661\u0662\u0663",
                                  "XX101", "", "GH101\n"])
def test_check_codes_are_read_as_the_pattern_reads_them(text: str):
    from gpuhealth.checks.registry import is_code

    assert is_code(text) == bool(re.fullmatch(r"GH\d{3}", text))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abz09-_A \u0131", max_size=12))
def test_slugs_are_read_as_the_pattern_reads_them(text: str):
    from gpuhealth.checks.registry import is_slug
    from gpuhealth.evidence.registry import is_slug as is_kind_slug

    want = bool(re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", text))
    assert is_slug(text) == want and is_kind_slug(text) == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(sorted(xid.ACTION_WORDS)), st.text(alphabet="aZ_/ ;:(),.-1\u00e9\u0661\n",
                                                                            max_size=4)), max_size=8))
def test_xid_buckets_are_put_in_words_as_the_pattern_of_their_names_would(parts: list[str]):
    bucket = "".join(parts)
    names = re.compile(r"(?<![\w/])(" + "|".join(sorted(map(re.escape, xid.ACTION_WORDS), key=len, reverse=True))
                       + r")(?![\w/])")
    want = names.sub(lambda m: xid.ACTION_WORDS[m[0]], bucket) if bucket else "no action given by NVIDIA"
    assert xid.action_in_words(bucket) == want


def test_type_hints_are_typings_for_every_dataclass_of_the_package():
    """model.type_hints (each annotation text compiled once) must read every class as typing does."""
    import dataclasses
    import typing

    from gpuhealth.model import type_hints

    seen = 0
    for name in sorted(m.name for m in pkgutil.walk_packages(gpuhealth.__path__, "gpuhealth.")
                       if not m.name.endswith("__main__")):
        module = importlib.import_module(name)
        for value in list(vars(module).values()):
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == name:
                assert type_hints(value) == typing.get_type_hints(value), value
                seen += 1
    assert seen >= 100


# --------------------------------------------------------------------------- the program's entry and exit

def _program(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` then the program (gpuhealth.__main__.run) with ``argv``, as the installed script does."""
    script = (f"import sys\nsys.argv = {['gpuhealth', *argv]!r}\n{code}\n"
              "from gpuhealth.__main__ import run\nrun()\n")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def evidence(bundle_dir: Path) -> list[str]:
    smi = next(p for p in (bundle_dir / "commands").glob("nvidia-smi_-q.stdout"))
    dmesg = next((bundle_dir / "commands").glob("dmesg*.stdout"))
    return [str(smi), str(dmesg)]


def test_the_program_leaves_without_the_tear_down_once_it_printed_its_report(evidence: list[str]):
    from click.testing import CliRunner

    from gpuhealth.cli import main

    want = CliRunner().invoke(main, ["analyze", *evidence, "--format", "json"])
    # an object that says when the interpreter's tear-down reaches it
    witness = "class Witness:\n    def __del__(self):\n        print('TORN DOWN', file=sys.stderr)\nw = Witness()"
    done = _program(witness, "analyze", *evidence, "--format", "json")
    assert (done.returncode, done.stdout) == (want.exit_code, want.stdout) and want.exit_code == 2
    assert "TORN DOWN" not in done.stderr  # left with os._exit, the output flushed first
    text = _program(witness, "analyze", *evidence)
    assert text.returncode == 2 and "BROKEN" in text.stdout


def test_the_program_exits_as_usual_when_something_else_would_run_at_exit(evidence: list[str]):
    handler = "import atexit\natexit.register(lambda: print('HANDLER RAN', file=sys.stderr))"
    done = _program(handler, "analyze", *evidence, "--format", "json")
    assert done.returncode == 2 and json.loads(done.stdout)["verdict"] and "HANDLER RAN" in done.stderr
    thread = "import threading, time\nthreading.Thread(target=time.sleep, args=(3,)).start()"  # outlives the run
    witness = "class Witness:\n    def __del__(self):\n        print('TORN DOWN', file=sys.stderr)\nw = Witness()"
    done = _program(f"{thread}\n{witness}", "analyze", *evidence, "--format", "json")
    assert done.returncode == 2 and "TORN DOWN" in done.stderr  # another thread: the interpreter joins it
    failed = _program(witness, "analyze", "/nonexistent/file")
    assert failed.returncode == 3 and "TORN DOWN" in failed.stderr  # no report printed: the usual exit


def test_the_program_collects_garbage_rarely_from_its_first_import(evidence: list[str]):
    """The entry point raises the collector's threshold before click and the package are imported."""
    count = ("import atexit, gc\nstart = gc.get_stats()[0]['collections']\n"
             "atexit.register(lambda: print('GC', gc.get_stats()[0]['collections'] - start, file=sys.stderr))")
    program = _program(count, "analyze", *evidence, "--format", "json")
    script = (f"import sys\nsys.argv = {['gpuhealth', 'analyze', *evidence, '--format', 'json']!r}\n{count}\n"
              "from gpuhealth.cli import main\nmain()\n")
    plain = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    collections = [int(done.stderr.rsplit("GC ", 1)[1].split()[0]) for done in (program, plain)]
    assert collections[0] <= 3 < 6 <= collections[1], collections


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 200_000])
@pytest.mark.parametrize("limit", [1, 65536, 100_000, 64 * 1024 * 1024])
def test_a_capped_read_gives_what_one_read_of_the_limit_gives(tmp_path: Path, size: int, limit: int):
    from gpuhealth.bundle import read_capped

    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    with open(path, "rb") as one, open(path, "rb") as capped:
        assert read_capped(capped, limit) == one.read(limit)
    from gpuhealth.bundle import read_file_capped

    with open(path, "rb") as one:
        assert read_file_capped(str(path), limit) == one.read(limit)


@pytest.mark.parametrize("size", [0, 10, 65536, 1_000_000])
def test_a_capped_read_asks_for_no_more_than_it_has_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int):
    """``os.read(fd, n)`` allocates n bytes first: a small file read under the 64 MiB cap must not ask for 64 MiB
    to find its end (a replay reads ~140 files: that was 6 ms of `check --from`)."""
    import os

    from gpuhealth import bundle

    asked: list[int] = []
    real_read = os.read

    def read(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    monkeypatch.setattr(bundle.os, "read", read)
    assert bundle.read_file_capped(str(path), 64 * 1024 * 1024) == b"x" * size
    read_so_far = [0]
    for n in asked:
        assert n <= max(65536, read_so_far[-1]), asked
        read_so_far.append(min(size, read_so_far[-1] + n))
    assert len(asked) <= 2 + size.bit_length()  # a large file in few reads: each asks for as much as it has


def _pathlib_safe_relative(path: str) -> str:
    """bundle._safe_relative as it was written with pathlib."""
    from pathlib import PurePosixPath

    parts = [p for p in PurePosixPath(path).parts if p not in ("/", "", ".", "..")]
    return str(PurePosixPath(*parts)) if parts else "_"


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="/.ab", max_size=12))
def test_a_host_path_maps_into_the_bundle_as_pathlib_mapped_it(path: str):
    from gpuhealth.bundle import _safe_relative

    assert _safe_relative(path) == _pathlib_safe_relative(path)
    assert os.path.join("/b/root", _safe_relative(path)) == str(Path("/b/root") / _pathlib_safe_relative(path))
