"""The one seam to the host: every file read and every command run goes through a ``Host``.

``LocalHost`` reads the real machine, ``BundleHost`` replays a captured bundle, ``RecordingHost`` wraps a
live host and writes every answer into a bundle. Because live and offline runs ask the same questions
through the same interface, they produce the same snapshot and the same findings.

Nothing here raises for ordinary trouble: "not installed", "permission denied" and "timed out" are
answers, carried in the returned objects.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from gpuhealth.model import STUCK_MARKER, CommandRun
from gpuhealth.records import record

if TYPE_CHECKING:
    import subprocess

# subprocess, selectors, socket and signal are imported where a live host uses them: a bundle replayed by
# `check --from` or `analyze` never runs a command, and those imports were a tenth of its start-up.

DEFAULT_TIMEOUT_S = 10.0
MAX_READ_BYTES = 64 * 1024 * 1024  # a kernel log can be large; a host file larger than this is cut
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
READ_CHUNK = 1024 * 1024


@record
class FileContent:
    """A file's bytes, or why they could not be read (``error``)."""

    path: str
    data: bytes | None = None
    error: str | None = None

    @property
    def text(self) -> str | None:
        return None if self.data is None else self.data.decode("utf-8", errors="replace")


@record
class Listing:
    path: str
    names: tuple[str, ...] | None = None
    error: str | None = None


@record
class FileStat:
    path: str
    mtime: float | None = None
    size: int | None = None
    is_dir: bool | None = None
    error: str | None = None


class Host(Protocol):
    """What collection may ask of a machine."""

    def read(self, path: str) -> FileContent: ...
    def listdir(self, path: str) -> Listing: ...
    def readlink(self, path: str) -> str | None: ...
    def stat(self, path: str) -> FileStat: ...
    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandRun: ...
    def nvml(self) -> dict[str, Any]: ...
    def environment(self) -> dict[str, str]: ...


def explain_os_error(path: str, exc: OSError) -> str:
    """A reason a person can act on: what failed and, where there is one, the fix."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        if path.startswith("/var/log"):
            return "permission denied: run as root, or add the user to group adm"
        return "permission denied: run as root (sudo)"
    if exc.errno == errno.ENOENT:
        return "not present"
    if exc.errno == errno.ENOTDIR:
        return "not a directory"
    return exc.strerror or str(exc)


class LocalHost:
    """The real machine, read under ``root`` (``/`` unless a test points it at a fake tree)."""

    def __init__(self, root: str = "/", nvml_timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.root = root.rstrip("/") or ""
        self.nvml_timeout = nvml_timeout

    def _real(self, path: str) -> str:
        return self.root + path

    def read(self, path: str) -> FileContent:
        try:
            with open(self._real(path), "rb") as handle:
                return FileContent(path, _read_bounded(handle))
        except OSError as exc:
            return FileContent(path, error=explain_os_error(path, exc))

    def listdir(self, path: str) -> Listing:
        try:
            return Listing(path, tuple(sorted(os.listdir(self._real(path)))))
        except OSError as exc:
            return Listing(path, error=explain_os_error(path, exc))

    def readlink(self, path: str) -> str | None:
        try:
            return os.readlink(self._real(path))
        except OSError:
            return None

    def stat(self, path: str) -> FileStat:
        try:
            result = os.stat(self._real(path))
        except OSError as exc:
            return FileStat(path, error=explain_os_error(path, exc))
        return FileStat(path, result.st_mtime, result.st_size, os.path.isdir(self._real(path)))

    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandRun:
        return run_command(argv, timeout)

    def nvml(self) -> dict[str, Any]:
        # Imported here so that importing the host module never loads NVML.
        from gpuhealth import nvml

        return nvml.probe_with_timeout(self.nvml_timeout)

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    @staticmethod
    def hostname() -> str:
        import socket

        return socket.gethostname()


def _read_bounded(handle: BinaryIO) -> bytes:
    """Read in modest chunks: /proc/sys files fail with ENOMEM when asked for a huge read at once."""
    chunks = []
    total = 0
    while total < MAX_READ_BYTES:
        chunk = handle.read(min(READ_CHUNK, MAX_READ_BYTES - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def run_command(argv: list[str], timeout: float) -> CommandRun:
    """Run ``argv`` under a hard deadline, keeping at most ``MAX_OUTPUT_BYTES`` of each stream.

    Output is read as it arrives, never all kept and cut afterwards. At the deadline, or when a stream
    passes the cap, the whole process group is killed. Every wait after that is bounded too: a grandchild
    that left the group holding stdout cannot stretch the deadline, and a process the kernel will not let
    die (state D, stuck in a driver call) is abandoned, never waited for, and said so in ``error``.
    """
    import subprocess

    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, start_new_session=True,
        )
    except FileNotFoundError:
        return CommandRun(tuple(argv), None, error="not installed")
    except PermissionError:
        return CommandRun(tuple(argv), None, error="permission denied")
    except OSError as exc:
        return CommandRun(tuple(argv), None, error=exc.strerror or str(exc))
    reader = _BoundedReader(process)
    try:
        ended = reader.pump(started + timeout)
        if ended != "exited" or reader.open_streams():
            # Also when it exited but helpers of its group still hold the pipes: none outlives the command.
            _kill_group(process)
        if ended != "exited":
            reader.pump(time.monotonic() + KILL_GRACE_S)  # what was written before the kill
    finally:
        reader.close()
    stuck = _reap(process)
    timed_out = ended == "deadline" or stuck is not None
    error = None
    if stuck is not None:
        error = (f"timed out after {timeout:g} s and {STUCK_MARKER} even by SIGKILL (process state {stuck}: "
                 "stuck in the driver); abandoned")
    elif timed_out:
        error = f"timed out after {timeout:g} s"
    elif ended == "cap":
        error = f"output larger than {MAX_OUTPUT_BYTES} bytes: killed, output cut"
    return CommandRun(
        tuple(argv),
        process.returncode if ended == "exited" and stuck is None else None,
        reader.text(0), reader.text(1),
        round(time.monotonic() - started, 3),
        timed_out,
        error,
    )


KILL_GRACE_S = 0.5  # after SIGKILL: time to drain the pipes and for the kernel to reap the process
EXIT_GRACE_S = 0.5  # after the command exited: time for its last output when a helper still holds the pipe


class _BoundedReader:
    """Reads a process's stdout and stderr as they come, keeping at most ``MAX_OUTPUT_BYTES`` of each."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None and process.stderr is not None
        self.process = process
        self.streams = [process.stdout, process.stderr]
        self.buffers = [bytearray(), bytearray()]
        import selectors

        self.selector = selectors.DefaultSelector()
        for index, stream in enumerate(self.streams):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ, index)

    def pump(self, deadline: float) -> str:
        """Read until both streams end and the process exited ("exited"), the deadline ("deadline"),
        or a stream passes the cap ("cap")."""
        exited_at: float | None = None
        while True:
            now = time.monotonic()
            if exited_at is None and self.process.poll() is not None:
                exited_at = now
            if exited_at is not None and (not self.selector.get_map() or now > exited_at + EXIT_GRACE_S):
                return "exited"
            if now >= deadline:
                return "deadline"
            if not self.selector.get_map():  # both pipes closed, process still running
                time.sleep(min(0.02, deadline - now))
                continue
            for key, _ in self.selector.select(min(0.05, deadline - now)):
                if self._read(key.fileobj, key.data) == "cap":
                    return "cap"

    def _read(self, stream: Any, index: int) -> str | None:
        try:
            chunk = os.read(stream.fileno(), READ_CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        if not chunk:
            self.selector.unregister(stream)
            return None
        room = MAX_OUTPUT_BYTES - len(self.buffers[index])
        self.buffers[index] += chunk[:room]
        return "cap" if len(chunk) > room else None

    def open_streams(self) -> int:
        return len(self.selector.get_map())

    def close(self) -> None:
        self.selector.close()
        for stream in self.streams:
            stream.close()

    def text(self, index: int) -> str:
        return self.buffers[index].decode("utf-8", errors="replace")


def _reap(process: subprocess.Popen[bytes]) -> str | None:
    """Wait (bounded) for a killed process; its state letter when it will not die (then it is abandoned)."""
    import subprocess

    try:
        process.wait(KILL_GRACE_S)
        return None
    except subprocess.TimeoutExpired:
        pass
    try:
        with open(f"/proc/{process.pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "unknown"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        if process.returncode is None:
            with contextlib.suppress(OSError):
                process.kill()
