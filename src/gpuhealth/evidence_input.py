"""How evidence comes in: a path or standard input, opened and read with limits, streamed when large.

Limits (docs/limits.md, "analyze input"), all enforced before or while reading, never after:

- Only regular files, FIFOs (``<(dmesg)``) and standard input are read. A device (``/dev/zero``), a
  directory or a socket is refused before anything is read.
- A FIFO must deliver data within ``open_timeout`` seconds (one with no writer would block forever).
- At most ``max_bytes`` per input (default 4 GiB; gzip counts decompressed bytes): a regular file's size is
  checked before reading, a stream (``yes | gpuhealth analyze -``) stops there. Past it: ``InputError``,
  one line naming the input.
- A kernel log larger than ``STREAM_FROM_BYTES`` is never held in memory: a regular file goes to the forked
  file scanner, a stream (a pipe, a gzip file) to the stream scanner; both aggregate events as they go.
- Anything else is read whole up to ``WHOLE_MAX_BYTES`` and sniffed by content (bug reports are split into
  their sections). Larger than that, only its kernel-log lines are read, by the stream scanner.
- Text in UTF-16 or UTF-32 (with a byte-order mark, or UTF-16 told by its NUL bytes), UTF-8 with a mark, and
  CR-only line ends are converted to UTF-8 with LF line ends as they are read (``gpuhealth.decoding``), before
  any of the above: the limits count the bytes of the input as given.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any, BinaryIO

from gpuhealth.decoding import Transcoder, sniff
from gpuhealth.model import KernelLog, ParseError
from gpuhealth.records import record

DEFAULT_MAX_BYTES = 4 * 1024 ** 3
DEFAULT_OPEN_TIMEOUT_S = 10.0
STREAM_FROM_BYTES = 4 * 1024 * 1024  # a kernel log larger than this is scanned as a stream
WHOLE_MAX_BYTES = 64 * 1024 * 1024  # other evidence is read whole up to this (a large bug report)
_SNIFF_BYTES = 64 * 1024  # what decides "kernel log" before the rest is read
_READ = 1024 * 1024
MAX_CONFIG_BYTES = 1024 * 1024  # a config file is a few hundred bytes; this bounds what one may cost


class InputError(Exception):
    """An input that cannot be read within the limits: the message is one line naming it and why."""


@record
class Evidence:
    """One input: its text when small enough to sniff, or the kernel log scanned from it as a stream."""

    name: str
    text: str | None = None
    kernel_log: KernelLog | None = None
    note: str = ""  # what was (not) read of a large input
    size: int = 0  # bytes read (decompressed)

    @property
    def content(self) -> str | KernelLog:
        if self.kernel_log is not None:
            return self.kernel_log
        return self.text or ""


def human_bytes(size: int) -> str:
    for unit, factor in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if size >= factor:
            value = size / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"


def parse_max_bytes(text: str) -> int:
    """``4G``, ``512M``, ``64K``, ``1000`` (bytes) -> bytes. ValueError when it is none of these."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    factor = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}.get(text[-1:], 1)
    number = text[:-1] if factor > 1 else text
    if not number.isdigit() or len(number) > 15 or int(number) <= 0:
        raise ValueError(f"{text!r} is not a size (bytes, or a number with K, M, G)")
    return int(number) * factor


def read_evidence(name: str, max_bytes: int = DEFAULT_MAX_BYTES,
                  open_timeout: float = DEFAULT_OPEN_TIMEOUT_S) -> Evidence:
    """Read one input (``-`` is standard input) within the limits. InputError when it cannot be."""
    display = "<stdin>" if name == "-" else name
    raw = None
    try:
        if name == "-" and not _has_fd(sys.stdin):  # standard input replaced in-process (tests, embedding)
            return _read(sys.stdin.buffer, display, None, max_bytes)
        fd, regular, size = _open(name, display, open_timeout)
        raw = os.fdopen(fd, "rb", buffering=0, closefd=True)
        if regular and size > max_bytes:
            raise InputError(f"{display}: {human_bytes(size)}, over the {human_bytes(max_bytes)} limit (--max-bytes)"
                             "; not read")
        return _read(raw, display, name if regular else None, max_bytes)
    except OSError as exc:
        raise InputError(f"{display}: {exc.strerror or exc}") from exc
    except Exception as exc:  # gzip's BadGzipFile is an OSError: the clause above
        if not isinstance(exc, EOFError) and not _zlib_error(exc):
            raise
        raise InputError(f"{display}: corrupt gzip data ({exc})") from exc
    finally:
        if raw is not None:
            raw.close()


def _zlib_error(exc: BaseException) -> bool:
    """zlib's error (only gzipped input, which imports zlib, can raise one: zlib is not imported here)."""
    zlib = sys.modules.get("zlib")
    return zlib is not None and isinstance(exc, zlib.error)


def kernel_log_from_path(path: str, source: str, max_bytes: int = DEFAULT_MAX_BYTES) -> KernelLog:
    """A kernel log kept in a file (a bundle's ``dmesg`` output): scanned in place, never read whole.

    OSError when it cannot be opened, ParseError when it is not text, InputError past ``max_bytes``.
    """
    from gpuhealth.parsers.kernel_log import parse_kernel_log_file

    size = os.stat(path).st_size
    if size > max_bytes:
        raise InputError(f"{source}: {human_bytes(size)}, over the {human_bytes(max_bytes)} limit; not read")
    return parse_kernel_log_file(path, source)


def read_config_text(path: str | os.PathLike[str], max_bytes: int = MAX_CONFIG_BYTES,
                     open_timeout: float = DEFAULT_OPEN_TIMEOUT_S) -> str:
    """A configuration file's text (``check --config``, ``monitor``/``serve`` ``--config``), with the checks
    evidence gets: a device or a directory is refused before anything is read (``/dev/zero`` would never end),
    a FIFO must deliver within ``open_timeout`` seconds, the size is checked before reading (and counted while
    reading a FIFO), and the text must be UTF-8 (a UTF-8 byte-order mark is allowed). InputError, one line
    naming the file, otherwise."""
    name = os.fspath(path)
    display = name
    name = os.path.join(".", name) if name == "-" else name  # a file named "-", never standard input
    fd, regular, size = _open(name, display, open_timeout, reads="a config must be a file", timeout_hint="")
    with os.fdopen(fd, "rb", buffering=0, closefd=True) as raw:
        if regular and size > max_bytes:
            raise InputError(f"{display}: {human_bytes(size)}, over the {human_bytes(max_bytes)} limit for a config "
                             "file; not read")
        try:
            data = bytes(_read_up_to(raw, max_bytes + 1))
        except OSError as exc:
            raise InputError(f"{display}: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:
        raise InputError(f"{display}: more than {human_bytes(max_bytes)}, over the limit for a config file; "
                         "stopped reading")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        utf16 = " (UTF-16 text: save it as UTF-8)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise InputError(f"{display}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}){utf16}; "
                         "a config file must be UTF-8") from None


# --------------------------------------------------------------------------- opening


def _has_fd(stream: Any) -> bool:
    try:
        stream.fileno()
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both OSError and ValueError
        return False
    return True


def _open(name: str, display: str, timeout: float, reads: str = "evidence is read from files, FIFOs and standard input",
          timeout_hint: str = " (--open-timeout)") -> tuple[int, bool, int]:
    """(fd, is a regular file, size) for a path or standard input, refusing what cannot be read safely.
    ``reads`` and ``timeout_hint`` end the refusals: what the caller reads, the option that sets the wait."""
    if name == "-":
        try:
            fd = os.dup(sys.stdin.fileno())
        except (OSError, ValueError, AttributeError) as exc:
            raise InputError(f"{display}: not readable ({exc})") from exc
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            return fd, True, os.fstat(fd).st_size
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd):
            return fd, False, 0
        os.close(fd)
        raise InputError(f"{display}: {_what(mode)}, not a file or a pipe; refused")
    try:
        mode = os.stat(name).st_mode
        if stat.S_ISREG(mode):
            fd = os.open(name, os.O_RDONLY)
            return fd, True, os.fstat(fd).st_size
        if not stat.S_ISFIFO(mode):
            raise InputError(f"{display}: {_what(mode)}, not a regular file; refused ({reads})")
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO: opening must not wait for a writer
    except OSError as exc:
        raise InputError(f"{display}: {exc.strerror or exc}") from exc
    import select  # here: only a FIFO is waited for

    poll = select.poll()
    poll.register(fd, select.POLLIN | select.POLLHUP)
    if not poll.poll(max(0, int(timeout * 1000))):
        os.close(fd)
        raise InputError(f"{display}: a FIFO with no data after {timeout:g} s (no writer?); gave up{timeout_hint}")
    os.set_blocking(fd, True)
    return fd, False, 0


def _what(mode: int) -> str:
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


# --------------------------------------------------------------------------- reading


class _Limited:
    """A byte stream that raises InputError once more than ``limit`` bytes came through it."""

    def __init__(self, stream: Any, limit: int, display: str, prefix: bytes = b"") -> None:
        self._stream = stream
        self._limit = limit
        self._display = display
        self._prefix = prefix
        self.count = 0

    def _account(self, n: int) -> int:
        self.count += n
        if self.count > self._limit:
            raise InputError(f"{self._display}: more than {human_bytes(self._limit)} (the --max-bytes limit); "
                             "stopped reading")
        return n

    def read(self, size: int = -1) -> bytes:
        if self._prefix:
            size = len(self._prefix) if size < 0 else size
            data, self._prefix = self._prefix[:size], self._prefix[size:]
        else:
            data = self._stream.read(size if size >= 0 else _READ) or b""
        self._account(len(data))
        return data

    def readinto(self, view: Any) -> int:
        if self._prefix:
            n = min(len(view), len(self._prefix))
            view[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return self._account(n)
        return self._account(self._stream.readinto(view) or 0)


def _read_up_to(stream: Any, size: int, into: bytearray | None = None) -> bytearray:
    """Up to ``size`` more bytes of ``stream``, appended to ``into`` (one buffer: no copies to join)."""
    buf = bytearray() if into is None else into
    goal = len(buf) + size
    while len(buf) < goal:
        data = stream.read(min(_READ, goal - len(buf)))
        if not data:
            break
        buf += data
    return buf


def _read(raw: BinaryIO, display: str, path: str | None, max_bytes: int) -> Evidence:
    magic = bytes(_read_up_to(raw, 2))
    gzipped = magic == b"\x1f\x8b"
    stream: Any = _Limited(raw, max_bytes, display, magic)
    if gzipped:
        import gzip  # only for gzipped input: not at start-up

        stream = _Limited(gzip.GzipFile(fileobj=stream, mode="rb"), max_bytes, display)
        path = None  # the file scanner reads plain files only
    data = _read_up_to(stream, _SNIFF_BYTES)
    conversion = sniff(bytes(data))
    if conversion is not None:  # UTF-16/32, a byte-order mark, CR-only line ends: converted as it is read
        stream = Transcoder(stream, conversion, head=bytes(data))
        path = None  # the file scanner reads the file's own bytes: converted text goes to the stream scanner
        data = _read_up_to(stream, _SNIFF_BYTES)
    kernel = _looks_like_kernel_log(bytes(data))
    whole = STREAM_FROM_BYTES if kernel else WHOLE_MAX_BYTES
    _read_up_to(stream, whole + 1 - len(data), into=data)
    if len(data) <= whole:
        return Evidence(display, text=data.decode("utf-8", errors="replace"), size=len(data))
    note = "" if kernel else (f"larger than {human_bytes(WHOLE_MAX_BYTES)} and not a plain kernel log: only its "
                              "kernel-log lines were read")
    if path is not None:
        data = bytearray()  # the file scanner reads the file itself: the bytes read so far are not kept
    return _stream_kernel_log(stream, display, path, data, note)


def _stream_kernel_log(stream: Any, display: str, path: str | None, head: bytearray, note: str) -> Evidence:
    from gpuhealth.parsers.kernel_log import parse_kernel_log_file, parse_kernel_log_stream

    try:
        if path is not None:  # a plain regular file: the scanner reads it in place, in parallel
            log = parse_kernel_log_file(path, display)
        else:
            log = parse_kernel_log_stream(stream, display, head)
    except ParseError as exc:
        return Evidence(display, note=f"not a kernel log ({exc}); an input this large is only read as one",
                        size=len(head))
    return Evidence(display, kernel_log=log, note=note or "kernel log, scanned as a stream",
                    size=log.bytes_scanned)


def _looks_like_kernel_log(head: bytes) -> bool:
    """A plain kernel log (not a bug report or capture file that holds one among other sections)."""
    text = head.decode("utf-8", errors="replace")
    if "nvidia-bug-report" in text or "NVIDIA bug report log" in text or text.startswith("#" * 40):
        return False
    from gpuhealth.parsers.kernel_log import detect_log_format

    try:
        fmt = detect_log_format(head)
    except ParseError:
        return False
    return fmt != "plain" or "NVRM" in text
