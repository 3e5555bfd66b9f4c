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

    def stream(self, argv: list[str], timeout: float, max_bytes: int) -> CommandOutput | CommandRun:
        """The command's standard output as a stream (a large kernel log is scanned as it comes, never held
        whole); the CommandRun that says why when it cannot be started."""
        return CommandOutput.start(argv, timeout, max_bytes)

    def kmsg(self, path: str | None = None) -> KmsgReader | str:
        """A non-blocking reader of the kernel's log records (``/dev/kmsg``), or why not (one line): the
        monitor follows it for the text of each Xid (monitor/kmsg.py)."""
        path = path or KMSG_PATH
        try:
            fd = os.open(self._real(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            return f"{path}: {explain_os_error(path, exc)}"
        return KmsgReader(path, fd)

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


def _spawn(argv: list[str]) -> subprocess.Popen[bytes] | CommandRun:
    """Start ``argv`` in its own process group (so a deadline can kill all it started), in the C locale (so
    its output parses), or the CommandRun that says why it could not start."""
    import subprocess

    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "LC_ALL": "C", "LANG": "C"}, start_new_session=True)
    except FileNotFoundError:
        return CommandRun(tuple(argv), None, error="not installed")
    except PermissionError:
        return CommandRun(tuple(argv), None, error="permission denied")
    except OSError as exc:
        return CommandRun(tuple(argv), None, error=exc.strerror or str(exc))


def run_command(argv: list[str], timeout: float) -> CommandRun:
    """Run ``argv`` under a hard deadline, keeping at most ``MAX_OUTPUT_BYTES`` of each stream.

    Output is read as it arrives, never all kept and cut afterwards. At the deadline, or when a stream
    passes the cap, the whole process group is killed. Every wait after that is bounded too: a grandchild
    that left the group holding stdout cannot stretch the deadline, and a process the kernel will not let
    die (state D, stuck in a driver call) is abandoned, never waited for, and said so in ``error``.
    """
    started = time.monotonic()
    process = _spawn(argv)
    if isinstance(process, CommandRun):
        return process
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


class CommandLimit(Exception):
    """A streamed command passed its deadline or its byte limit: the reading stopped there (one line why)."""


class CommandOutput:
    """A command's standard output, read as a stream under the limits of ``run_command``.

    The command runs in its own process group with stdin closed and ``LC_ALL=C``. ``readinto`` waits for
    output no later than the deadline and raises ``CommandLimit`` at the deadline or when the output passes
    ``max_bytes``: before those bytes reach the reader, so the work stays bounded like the wait. Standard
    error is kept up to MAX_OUTPUT_BYTES meanwhile. ``finish`` ends it (the group is killed if it still runs
    or still holds the pipe; every wait bounded) and returns its CommandRun, without the stdout.
    """

    def __init__(self, argv: list[str], process: subprocess.Popen[bytes], timeout: float, max_bytes: int,
                 started: float) -> None:
        assert process.stdout is not None and process.stderr is not None
        self.argv, self.process, self.timeout, self.max_bytes = tuple(argv), process, timeout, max_bytes
        self.started = started
        self.deadline = started + timeout
        self.count = 0
        self.stderr = bytearray()
        self.ended: str | None = None  # "eof", "deadline", "cap"
        self.exited_at: float | None = None
        import select

        self.poll = select.poll()
        self.open = {process.stdout.fileno(): 0, process.stderr.fileno(): 1}
        for fd in self.open:
            os.set_blocking(fd, False)
            self.poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    @classmethod
    def start(cls, argv: list[str], timeout: float, max_bytes: int) -> CommandOutput | CommandRun:
        started = time.monotonic()
        process = _spawn(argv)
        if isinstance(process, CommandRun):
            return process
        return cls(argv, process, timeout, max_bytes, started)

    def readinto(self, view: Any) -> int:
        """Up to len(view) bytes of standard output into ``view``; 0 at its end."""
        out = self.process.stdout.fileno()  # type: ignore[union-attr]
        while out in self.open:
            now = time.monotonic()
            remaining = self.deadline - now
            if remaining <= 0:
                self.ended = "deadline"
                raise CommandLimit(f"timed out after {self.timeout:g} s")
            if self.exited_at is None and self.process.poll() is not None:
                self.exited_at = now
            if self.exited_at is not None:  # it exited: a helper left holding the pipe does not stretch the wait
                if now > self.exited_at + EXIT_GRACE_S:
                    self._close(out)
                    self.ended = "eof"
                    return 0
                remaining = min(remaining, self.exited_at + EXIT_GRACE_S - now)
            for fd, _ in self.poll.poll(max(1, min(int(remaining * 1000) + 1, 1000))):
                if self.open.get(fd) == 1:
                    self._stderr(fd)
                elif fd == out:
                    want = min(len(view), self.max_bytes - self.count + 1)  # one byte more shows the overflow
                    try:
                        got = os.readv(fd, [view[:want]])
                    except BlockingIOError:
                        continue
                    except OSError:
                        got = 0
                    if not got:
                        self._close(fd)
                        self.ended = "eof"
                        return 0
                    self.count += got
                    if self.count > self.max_bytes:
                        self.ended = "cap"
                        raise CommandLimit(f"output larger than {self.max_bytes} bytes: stopped reading")
                    return got
        return 0

    def read(self, size: int = -1) -> bytes:
        buf = bytearray(READ_CHUNK if size < 0 else size)
        with memoryview(buf) as view:
            got = self.readinto(view)
        return bytes(buf[:got])

    def _stderr(self, fd: int) -> None:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(fd)
            return
        self.stderr += chunk[:MAX_OUTPUT_BYTES - len(self.stderr)]

    def _close(self, fd: int) -> None:
        self.poll.unregister(fd)
        del self.open[fd]

    def finish(self) -> CommandRun:
        """End the command and say how it went (stdout is not kept). Waits at most until the deadline."""
        ended = self.ended
        exited = False
        if ended == "eof":  # let it exit and write the rest of stderr, within the deadline
            while not exited and time.monotonic() < self.deadline:
                exited = self.process.poll() is not None
                grace = time.monotonic() + (EXIT_GRACE_S if exited else 0.05)
                if not self.open:
                    time.sleep(0.02)  # both pipes closed, the command not yet exited
                while self.open and time.monotonic() < min(grace, self.deadline):
                    for fd, _ in self.poll.poll(20):
                        if self.open.get(fd) == 1:
                            self._stderr(fd)
                        elif fd in self.open:
                            self._close(fd)  # stdout again after its end: nothing more to read
            if not exited:
                ended = "deadline"
        if not exited or self.open:
            _kill_group(self.process)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        stuck = _reap(self.process)
        timed_out = ended == "deadline" or stuck is not None
        error = None
        if stuck is not None:
            error = (f"timed out after {self.timeout:g} s and {STUCK_MARKER} even by SIGKILL (process state "
                     f"{stuck}: stuck in the driver); abandoned")
        elif timed_out:
            error = f"timed out after {self.timeout:g} s"
        elif ended == "cap":
            error = f"output larger than {self.max_bytes} bytes: killed, stopped reading"
        elif ended is None:
            error = "output not read to its end"
        return CommandRun(self.argv, self.process.returncode if exited and stuck is None else None, "",
                          self.stderr.decode("utf-8", errors="replace"), round(time.monotonic() - self.started, 3),
                          timed_out, error)


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


KMSG_PATH = "/dev/kmsg"
KMSG_READ = 16 * 1024  # /dev/kmsg hands out one record per read and refuses (EINVAL) a buffer shorter than it


class KmsgReader:
    """The kernel's log records, read without blocking from ``/dev/kmsg`` (or, in tests, a file or FIFO under a
    fake root), one complete line at a time.

    /dev/kmsg answers each read with exactly one record, "prio,seq,usec,flags;text\\n" and then its dictionary
    lines (" KEY=value"), EAGAIN when none is left and EPIPE once when records were overwritten before they were
    read (Linux, Documentation/ABI/testing/dev-kmsg <https://www.kernel.org/doc/Documentation/ABI/testing/dev-kmsg>).
    A file hands out any number of bytes: a line cut at the end of a read waits in ``partial`` for the next one.
    Each ``read_lines`` is bounded in bytes and lines; what is left is read on the next call.
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._partial = b""
        self._ready: list[bytes] = []  # complete lines read but beyond the last call's line limit
        self.lost = 0  # times the kernel said records were overwritten before they were read (EPIPE)
        self.cut = 0  # lines longer than a read, dropped

    def seek_end(self) -> None:
        """Start after the last record there now (nothing already in the log is read)."""
        with contextlib.suppress(OSError):
            os.lseek(self._fd, 0, os.SEEK_END)

    def read_lines(self, max_bytes: int, max_lines: int) -> list[bytes]:
        """Up to ``max_lines`` complete lines (without their newline), reading at most ``max_bytes`` this call."""
        lines, self._ready = self._ready[:max_lines], self._ready[max_lines:]
        read = 0
        while len(lines) < max_lines and read < max_bytes and self._fd >= 0:
            try:
                chunk = os.read(self._fd, KMSG_READ)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records lost to the ring buffer: the next read goes on after them
                self.lost += 1
                continue
            except OSError:
                break
            if not chunk:  # a file's end (a FIFO with no writer): more may come later
                break
            read += len(chunk)
            whole = self._partial + chunk
            *complete, self._partial = whole.split(b"\n")
            if len(self._partial) > KMSG_READ:  # no record is this long: drop it rather than grow
                self._partial = b""
                self.cut += 1
            room = max_lines - len(lines)
            lines += complete[:room]
            self._ready += complete[room:]
        return lines

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
