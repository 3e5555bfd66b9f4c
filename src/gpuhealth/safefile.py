"""Every file gpuhealth writes goes through here: no write follows a planted link or reuses another's file.

Why: gpuhealth runs as root, often in directories other users can write to (``fix -o /tmp/fix.sh``). A
plain ``open(path, "w")`` follows a symbolic link planted at ``path`` and overwrites its target (then
``chmod 0755`` makes it executable), and reuses a file another user planted there, so that user can edit
the script before root runs it. So:

- a whole file (``write_file``) is written to a new temporary file in the same directory, opened with
  ``O_CREAT | O_EXCL | O_NOFOLLOW``, and renamed over the target: a rename replaces a link, never its target,
  and a reader never sees half a file;
- a file that must not exist yet (``create_new``, an archive) is opened with ``O_EXCL | O_NOFOLLOW``;
- a file written as it goes (``open_replacing``, a trace) is a new temporary file renamed into place at once;
- a file appended to (``open_append``, the alert log) is opened with ``O_NOFOLLOW`` and checked on its
  descriptor;
- a target that is there already must be a regular file owned by whoever runs gpuhealth (as root: by root),
  else it is refused: ``UnsafeFile``, an OSError whose text is ``PATH: why`` for the one-line exit 3;
- the history database (``check_database``) is never a link, and is created here before SQLite opens it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Any

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafeFile(OSError):
    """A path gpuhealth refuses to write (or open as its database); ``str()`` is ``PATH: why``."""

    def __init__(self, path: str | os.PathLike[str], why: str) -> None:
        super().__init__(errno.EPERM, why, os.fspath(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _who() -> str:
    return "root" if os.geteuid() == 0 else f"you (uid {os.geteuid()})"


def _check(path: str | os.PathLike[str], info: os.stat_result, owners: tuple[int, ...]) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFile(path, "is a symbolic link; refused (gpuhealth never writes through a link): "
                               "remove it or choose another path")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFile(path, "is not a regular file; refused")
    if info.st_uid not in owners:
        raise UnsafeFile(path, f"is owned by uid {info.st_uid}, not by {_who()}; refused (its owner could change "
                               "what gpuhealth writes): remove it or choose another path")


def check_target(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` when something is there that is not a regular file of ours; nothing there is fine."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    _check(path, info, (os.geteuid(),))


def _temporary(path: Path, mode: int) -> tuple[int, Path]:
    """A new file beside ``path`` (same directory, so a rename is atomic), opened for writing only by us."""
    stem = path.name[:200]  # the name must stay under NAME_MAX with the suffix
    for _ in range(100):
        temporary = path.with_name(f".{stem}.{os.urandom(6).hex()}.tmp")
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
        except FileExistsError:
            continue
        os.fchmod(descriptor, mode)  # exactly ``mode``, whatever the umask
        return descriptor, temporary
    raise UnsafeFile(path, "could not create a temporary file beside it")


def write_file(path: str | os.PathLike[str], data: bytes | str, mode: int = 0o600) -> None:
    """Write ``data`` as the whole of ``path`` (mode ``mode``): a new file renamed over the target."""
    path = Path(path)
    check_target(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor, temporary = _temporary(path, 0o600)
    try:
        with open(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fchmod(handle.fileno(), mode)  # the mode once the content is whole (a script: 0755)
        check_target(path)  # planted meanwhile: a rename would replace it, but the owner asked for this path
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def create_new(path: str | os.PathLike[str], mode: int = 0o600) -> IO[bytes]:
    """A new file at ``path`` for binary writing; refused (FileExistsError) when anything is there, a link too."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    os.fchmod(descriptor, mode)
    return open(descriptor, "wb")


def open_replacing(path: str | os.PathLike[str], mode: int = 0o600, binary: bool = False) -> IO[Any]:
    """``path`` as a new, empty file (text, or bytes with ``binary``) written as it goes (a trace, a streamed
    command output): renamed into place at once, so a killed writer still leaves what it flushed."""
    path = Path(path)
    check_target(path)
    descriptor, temporary = _temporary(path, mode)
    try:
        os.replace(temporary, path)
    except BaseException:
        os.close(descriptor)
        temporary.unlink(missing_ok=True)
        raise
    return open(descriptor, "wb") if binary else open(descriptor, "w", encoding="utf-8")


def open_append(path: str | os.PathLike[str], mode: int = 0o600) -> IO[str]:
    """``path`` opened for appending text (created when missing): never through a link, never another's file,
    never a FIFO or device (``O_NONBLOCK``: opening a FIFO must not wait for a reader)."""
    check_target(path)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, mode)
    try:
        _check(path, os.fstat(descriptor), (os.geteuid(),))  # what was opened, not what was looked at
    except BaseException:
        os.close(descriptor)
        raise
    return open(descriptor, "a", encoding="utf-8")


def make_directory(path: str | os.PathLike[str], mode: int = 0o700) -> None:
    """Create ``path`` (and missing parents); an existing ``path`` must be a directory of ours, not a link."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, mode)
        return
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFile(path, "is a symbolic link; refused (gpuhealth never writes through a link)")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFile(path, "is not a directory")
    if info.st_uid != os.geteuid():
        raise UnsafeFile(path, f"is owned by uid {info.st_uid}, not by {_who()}; refused (its owner could change "
                               "what gpuhealth writes there)")


DATABASE_COMPANIONS = ("-wal", "-shm", "-journal")  # SQLite's files beside a database, opened by name


def check_database(path: str | os.PathLike[str]) -> None:
    """Make ``path`` safe for SQLite to open: never a link (SQLite would follow it and turn its target into a
    database), a regular file owned by us or by root (root's history is readable by everyone), its companions
    alike, in a directory not open to every user (where anyone could swap the file after the check). A missing
    database is created here, empty, with ``O_EXCL | O_NOFOLLOW`` (0644 less the umask, as SQLite would make it:
    `history` and `usage` read root's history as any user), so SQLite only ever opens a
    file this check has seen."""
    path = Path(path)
    trusted = (os.geteuid(), 0)
    directory = os.stat(path.parent)
    if directory.st_mode & stat.S_IWOTH and not directory.st_mode & stat.S_ISVTX:  # anyone could swap the file
        raise UnsafeFile(path, f"its directory {path.parent} is writable by every user (and not sticky); refused: "
                               "choose another --db")
    missing = False
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in DATABASE_COMPANIONS)):
        try:
            info = os.lstat(candidate)
        except FileNotFoundError:
            missing = missing or candidate == path
            continue
        _check(candidate, info, trusted)
    if missing:  # a reader of root's history never gets here: it only opens a database that is there
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644))
        except FileExistsError:  # created meanwhile (another monitor): checked again, then opened
            _check(path, os.lstat(path), trusted)
