"""Files written safely (issue 25, items 8 and 19): no file gpuhealth writes follows a planted link or reuses a
file another user planted, and the history database is never a link.

The attacks are real: a symbolic link or a file of another uid is planted where gpuhealth will write, and the
tests check that the planted target keeps its bytes and its mode, and that gpuhealth exits 3 with one line
naming the file. A file of another uid needs ``os.chown``, so those tests run as root (the project's test
machines do) and are skipped, with that reason, otherwise.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuhealth import safefile
from gpuhealth.bundle import RecordingHost, write_archive
from gpuhealth.cli import main
from gpuhealth.collect import collect
from gpuhealth.monitor.commands import history
from gpuhealth.monitor.notify import LogFileNotifier
from gpuhealth.monitor.sources import TraceWriter
from gpuhealth.monitor.store import Store, StoreError
from gpuhealth.safefile import UnsafeFile
from hostcases import FakeHost, load_spec

AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="planting a file of another uid needs os.chown, i.e. root")
OTHER_UID = 65534  # nobody


@pytest.fixture
def bundle(tmp_path):
    recorder = RecordingHost(FakeHost(load_spec("h100x8-xid-ecc")), tmp_path / "bundle")
    collect(recorder)
    return recorder.finish()


@pytest.fixture
def victim(tmp_path):
    """A file the attacker wants overwritten: its bytes and its mode must survive."""
    path = tmp_path / "victim"
    path.write_text("precious\n")
    path.chmod(0o640)
    return path


def _untouched(victim: Path) -> bool:
    return victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o640


def _one_line_exit_3(result, path: Path, why: str) -> None:
    assert result.exit_code == 3, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and why in lines[0], result.output


# --------------------------------------------------------------------------- fix -o


def test_fix_output_through_a_planted_symlink_is_refused(bundle, tmp_path, victim):
    link = tmp_path / "fix.sh"
    link.symlink_to(victim)
    result = CliRunner().invoke(main, ["fix", "--from", str(bundle), "-o", str(link)])
    _one_line_exit_3(result, link, "symbolic link")
    assert _untouched(victim) and link.is_symlink()


def test_fix_output_through_a_dangling_symlink_creates_nothing(bundle, tmp_path):
    target = tmp_path / "would-be-created"
    link = tmp_path / "fix.sh"
    link.symlink_to(target)
    result = CliRunner().invoke(main, ["fix", "--from", str(bundle), "-o", str(link)])
    _one_line_exit_3(result, link, "symbolic link")
    assert not target.exists()


@needs_root
def test_fix_output_owned_by_another_user_is_refused(bundle, tmp_path, victim):
    os.chown(victim, OTHER_UID, OTHER_UID)
    result = CliRunner().invoke(main, ["fix", "--from", str(bundle), "-o", str(victim)])
    _one_line_exit_3(result, victim, f"owned by uid {OTHER_UID}")
    assert _untouched(victim) and victim.stat().st_uid == OTHER_UID


def test_fix_output_is_a_new_0755_file_replacing_our_own(bundle, tmp_path):
    out = tmp_path / "fix.sh"
    out.write_text("old script\n")
    out.chmod(0o600)
    before = out.stat().st_ino
    result = CliRunner().invoke(main, ["fix", "--from", str(bundle), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("#!") and stat.S_IMODE(out.stat().st_mode) == 0o755
    assert out.stat().st_ino != before  # a new file renamed into place, not the old one rewritten
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


# --------------------------------------------------------------------------- the helper itself


def test_write_file_refuses_a_directory_and_leaves_no_temporary(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(UnsafeFile, match="not a regular file"):
        safefile.write_file(tmp_path / "d", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_unsafe_file_is_one_line_naming_the_file(tmp_path):
    error = UnsafeFile(tmp_path / "f", "is a symbolic link; refused")
    assert str(error) == f"{tmp_path / 'f'}: is a symbolic link; refused"
    assert error.filename == str(tmp_path / "f") and error.strerror == "is a symbolic link; refused"


def test_create_new_refuses_a_symlink_even_a_dangling_one(tmp_path, victim):
    for target in (victim, tmp_path / "missing"):
        link = tmp_path / f"archive-{target.name}.tar.gz"
        link.symlink_to(target)
        with pytest.raises(FileExistsError):
            safefile.create_new(link)
    assert _untouched(victim) and not (tmp_path / "missing").exists()


def test_open_append_refuses_a_symlink_and_a_fifo(tmp_path, victim):
    link = tmp_path / "alerts.log"
    link.symlink_to(victim)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        LogFileNotifier(link)
    assert _untouched(victim)
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFile, match="not a regular file"):  # and it does not wait for a reader
        safefile.open_append(fifo)


def test_open_append_keeps_what_the_log_holds(tmp_path):
    log = tmp_path / "alerts.log"
    log.write_text("first\n")
    with safefile.open_append(log) as handle:
        handle.write("second\n")
    assert log.read_text() == "first\nsecond\n"


@needs_root
def test_open_append_refuses_a_log_of_another_user(tmp_path, victim):
    os.chown(victim, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeFile, match=f"owned by uid {OTHER_UID}"):
        safefile.open_append(victim)
    assert _untouched(victim)


def test_trace_recording_replaces_a_planted_symlink_refused(tmp_path, victim):
    link = tmp_path / "trace.jsonl"
    link.symlink_to(victim)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        TraceWriter(link, "gpuhealth test", "note")
    assert _untouched(victim)


def test_monitor_record_through_a_symlink_exits_3(tmp_path, victim):
    from gpuhealth.monitor.commands import monitor

    link = tmp_path / "rec.jsonl"
    link.symlink_to(victim)
    trace = Path(__file__).parent.parent / "examples" / "h100x8.trace"
    result = CliRunner().invoke(monitor, ["--source", f"replay:{trace}", "--replay-speed", "0", "--interval", "0.05",
                                          "--db", str(tmp_path / "h.db"), "--record", str(link)])
    _one_line_exit_3(result, link, "symbolic link")
    assert _untouched(victim)


# --------------------------------------------------------------------------- bundles and saved runs


def test_snapshot_into_a_symlinked_directory_is_refused(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o755)
    link = tmp_path / "bundle"
    link.symlink_to(real)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        RecordingHost(FakeHost(load_spec("no-gpu")), link)
    assert stat.S_IMODE(real.stat().st_mode) == 0o755 and not list(real.iterdir())  # not chmod-ed, not filled


def test_write_archive_never_overwrites(bundle, tmp_path, victim):
    link = tmp_path / "b.tar.gz"
    link.symlink_to(victim)
    with pytest.raises(FileExistsError):
        write_archive(bundle, link)
    assert _untouched(victim)


def test_check_save_into_a_symlinked_directory_exits_3(bundle, tmp_path):
    real = tmp_path / "real-runs"
    real.mkdir()
    link = tmp_path / "runs"
    link.symlink_to(real)
    result = CliRunner().invoke(main, ["check", "--from", str(bundle), "--save", str(link), "--format", "json"])
    assert result.exit_code == 3 and f"{link}: is a symbolic link" in result.output
    assert not list(real.iterdir())


@needs_root
def test_check_save_into_a_directory_of_another_user_exits_3(bundle, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    os.chown(runs, OTHER_UID, OTHER_UID)
    result = CliRunner().invoke(main, ["check", "--from", str(bundle), "--save", str(runs), "--format", "json"])
    assert result.exit_code == 3 and f"owned by uid {OTHER_UID}" in result.output
    assert not list(runs.iterdir())


# --------------------------------------------------------------------------- the history database


def test_a_database_symlink_to_an_empty_file_is_refused_and_stays_empty(tmp_path):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    link = tmp_path / "monitor.db"
    link.symlink_to(empty)
    with pytest.raises(StoreError, match="symbolic link"):
        Store(link)
    assert empty.read_bytes() == b""  # not turned into a database
    result = CliRunner().invoke(history, ["--db", str(link)])
    _one_line_exit_3(result, link, "symbolic link")
    assert empty.read_bytes() == b""


def test_a_dangling_database_symlink_is_refused_not_followed(tmp_path):
    link = tmp_path / "monitor.db"
    link.symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(StoreError, match="symbolic link"):
        Store(link)
    assert not (tmp_path / "created-through-the-link").exists()


def test_a_planted_wal_symlink_is_refused(tmp_path, victim):
    (tmp_path / "monitor.db-wal").symlink_to(victim)
    with pytest.raises(StoreError, match="monitor.db-wal: is a symbolic link"):
        Store(tmp_path / "monitor.db")
    assert _untouched(victim)


@needs_root
def test_a_database_of_another_user_is_refused(tmp_path):
    db = tmp_path / "monitor.db"
    Store(db).close()
    os.chown(db, OTHER_UID, OTHER_UID)
    with pytest.raises(StoreError, match=f"owned by uid {OTHER_UID}"):
        Store(db)


def test_a_database_in_a_world_writable_directory_is_refused(tmp_path):
    common = tmp_path / "open-to-all"
    common.mkdir()
    common.chmod(0o777)
    with pytest.raises(StoreError, match="writable by every user"):
        Store(common / "monitor.db")
    assert not list(common.iterdir())
    common.chmod(0o1777)  # sticky, as /tmp: nobody else can remove or rename our file
    Store(common / "monitor.db").close()


def test_a_new_database_is_created_by_the_check_as_sqlite_would(tmp_path):
    old = os.umask(0o022)
    try:
        Store(tmp_path / "monitor.db").close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "monitor.db").stat().st_mode) == 0o644  # history/usage read root's as users
