"""Bundles: a host captured to disk (``RecordingHost``), and replayed (``BundleHost``).

Layout (see docs/snapshot-format.md)::

    manifest.json        format, version, tool version, captured_at, hostname, commands, file errors,
                         directory listings, links, stats
    root/<host path>     every file read, at its host path
    commands/<key>.stdout, <key>.stderr
    nvml.json            what the NVML probe returned
    env.json             environment variables, secrets redacted

A bundle from another machine is untrusted: archive members with absolute paths, ``..``, links,
device files or excessive sizes are refused, and reads never leave the bundle directory.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import threading
import time
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from gpuhealth import __version__
from gpuhealth.host import DEFAULT_TIMEOUT_S, MAX_OUTPUT_BYTES, MAX_READ_BYTES, FileContent, FileStat, Host, Listing
from gpuhealth.lazyre import lazy_re
from gpuhealth.limits import (
    MAX_ENV_JSON_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_NVML_JSON_BYTES,
    InputLimitError,
    load_json,
)
from gpuhealth.model import CommandRun
from gpuhealth.redact import REDACTED, SECRET_MARKERS, redact_bytes, redact_environment, redact_text
from gpuhealth.safefile import create_new, make_directory, open_replacing, write_file

if TYPE_CHECKING:
    import tarfile
    import tempfile

# The archive and hashing modules (tarfile, gzip, bz2, lzma, zlib, shutil, tempfile, hashlib) are imported
# in the functions that use them: replaying a bundle directory needs none of them, and they cost start-up.

__all__ = ["REDACTED", "SECRET_MARKERS", "redact_environment"]  # re-exported: callers import them from here

FORMAT_NAME = "gpuhealth-bundle"
FORMAT_VERSION = 1
# A live host records at most MAX_READ_BYTES of a file and MAX_OUTPUT_BYTES of a command's output,
# so no honest bundle member is larger.
MAX_MEMBER_BYTES = max(MAX_READ_BYTES, MAX_OUTPUT_BYTES)
MAX_TOTAL_BYTES = 1024 * 1024 * 1024
MAX_MEMBERS = 20_000
MAX_TAR_HEADER_BYTES = 64 * 1024  # one PAX or GNU long-name header (real ones hold a path: < 4 KiB)
MAX_XZ_MEMORY = 256 * 1024 * 1024  # the xz decoder's memory (its dictionary), set by the archive's header
MAX_CHAINED_HEADERS = 4  # extended headers before one member (tarfile follows a chain by recursion)

_FIRST_READ = 64 * 1024


def read_capped(handle: IO[bytes], limit: int) -> bytes:
    """``handle.read(limit)`` for a file: the same bytes, without a ``limit``-sized buffer allocated up front
    for each of the (mostly tiny) files a replay reads (64 MiB each: ~15 % of the replay's time)."""
    data = handle.read(min(limit, _FIRST_READ))
    if len(data) == _FIRST_READ < limit:  # more may follow: the rest, up to the limit
        data += handle.read(limit - _FIRST_READ)
    return data


def read_file_capped(path: str, limit: int) -> bytes:
    """``open(path, "rb").read(limit)`` (``read_capped``) for a regular file, with the descriptor alone: a replay
    reads ~140 small files, and the file object and its buffer were most of what each read cost. OSError as
    ``open`` raises it (the callers refuse anything but a regular file before)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        # ``os.read(fd, n)`` allocates n bytes before it reads: asking for the rest of the limit (64 MiB) to learn
        # that a small file had ended cost a 64 MiB mmap and munmap per file, 6 ms of a replay. Each read asks for
        # at most what was read so far (at least 64 KiB): the end is found cheaply, a large file in few reads.
        chunks: list[bytes] = []
        total, size = 0, _FIRST_READ
        while total < limit:
            more = os.read(descriptor, min(size, limit - total))
            if not more:
                break
            chunks.append(more)
            total += len(more)
            size = max(size, total)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(descriptor)


class BundleError(Exception):
    """A bundle that cannot be used: the message names the file and the reason."""


def command_key(argv: list[str] | tuple[str, ...]) -> str:
    """A stable file-name-safe key for a command line."""
    joined = " ".join(argv)
    key = _readable_key(joined)
    if _key_is_hashed(joined, key):
        import hashlib

        key = f"{key}_{hashlib.sha1(joined.encode()).hexdigest()[:8]}"
    return key


def _readable_key(joined: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", joined).strip("_.")[:80]


def _key_is_hashed(joined: str, readable: str) -> bool:
    """Whether a command's key ends in a hash of the command line (``<readable>_<8 hex digits>``)."""
    return len(joined) > 80 or not readable


# --------------------------------------------------------------------------- recording


class RecordingHost:
    """Wraps a live host and records every answer into ``out_dir`` (thread-safe)."""

    def __init__(self, inner: Host, out_dir: str | Path, hostname: str | None = None) -> None:
        self.inner = inner
        self.out = Path(out_dir)
        _private_dir(self.out)
        self._lock = threading.Lock()
        # The moment of capture: the wrapped host's own (a test host's fixed date), else now.
        self.captured_at: str = getattr(inner, "captured_at", None) or time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._manifest: dict[str, Any] = {
            "format": FORMAT_NAME, "version": FORMAT_VERSION, "tool_version": __version__,
            "captured_at": self.captured_at, "hostname": hostname,
            "commands": [], "files": {}, "listings": {}, "links": {}, "stats": {},
        }

    def read(self, path: str) -> FileContent:
        result = self.inner.read(path)
        with self._lock:
            if result.data is not None:
                target = self.out / "root" / _safe_relative(path)
                _private_dir(target.parent)
                _write_private(target, redact_bytes(result.data)[:MAX_MEMBER_BYTES])  # "<redacted>" can be longer
                self._manifest["files"][path] = {"bytes": len(result.data)}
            else:
                self._manifest["files"][path] = {"error": result.error}
        return result

    def listdir(self, path: str) -> Listing:
        result = self.inner.listdir(path)
        with self._lock:
            self._manifest["listings"][path] = (
                list(result.names) if result.names is not None else {"error": result.error})
        return result

    def readlink(self, path: str) -> str | None:
        target = self.inner.readlink(path)
        with self._lock:
            self._manifest["links"][path] = target
        return target

    def stat(self, path: str) -> FileStat:
        result = self.inner.stat(path)
        with self._lock:
            self._manifest["stats"][path] = {
                k: v for k, v in vars(result).items() if k != "path" and v is not None}
        return result

    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandRun:
        result = self.inner.run(argv, timeout)
        self._record_run(argv, result)
        return result

    def stream(self, argv: list[str], timeout: float, max_bytes: int) -> _RecordedOutput | CommandRun:
        """The command's output as a stream (the kernel log), written to the bundle as it is read: never held
        whole. At most MAX_OUTPUT_BYTES, as ``run`` keeps (a bundle member is never larger); a host that cannot
        stream (a test host) answers through ``run``."""
        inner_stream = getattr(self.inner, "stream", None)
        if inner_stream is None:
            return self.run(argv, timeout)
        output = inner_stream(argv, timeout, min(max_bytes, MAX_OUTPUT_BYTES))
        if isinstance(output, CommandRun):  # it could not be started
            self._record_run(argv, output)
            return output
        with self._lock:
            _private_dir(self.out / "commands")
        return _RecordedOutput(self, argv, output)

    def _record_run(self, argv: list[str], result: CommandRun, stdout: bool = True) -> None:
        key = command_key(argv)
        with self._lock:
            commands = self.out / "commands"
            _private_dir(commands)
            streams = (("stdout", result.stdout), ("stderr", result.stderr)) if stdout else (("stderr", result.stderr),)
            for stream, text in streams:
                _write_private(commands / f"{key}.{stream}", redact_text(text).encode("utf-8")[:MAX_MEMBER_BYTES])
            self._manifest["commands"].append({
                "key": key, "argv": [redact_text(a) for a in argv], "exit_code": result.exit_code,
                "duration_s": result.duration_s, "timed_out": result.timed_out,
                "error": redact_text(result.error) if result.error else result.error,
            })

    def nvml(self) -> dict[str, Any]:
        answer = self.inner.nvml()
        with self._lock:
            _write_json(self.out / "nvml.json", answer)
        return answer

    def environment(self) -> dict[str, str]:
        env = redact_environment(self.inner.environment())
        with self._lock:
            _write_json(self.out / "env.json", env)
        return env

    def finish(self, redact_host: bool = False) -> Path:
        """Write the manifest; with ``redact_host``, replace host identifiers everywhere."""
        with self._lock:
            _write_json(self.out / "manifest.json", self._manifest)
        if redact_host:
            redact_bundle(self.out)
        for path in self.out.rglob("*"):  # parents made by mkdir(parents=True) got the umask's mode
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o700)
        return self.out


class _RecordedOutput:
    """A streamed command output (``host.CommandOutput``) that writes what its reader reads into the bundle's
    ``commands/KEY.stdout``, redacted a whole line at a time (a secret is never split across two writes);
    ``finish`` writes the rest, the standard error and the manifest entry, as ``RecordingHost.run`` would."""

    def __init__(self, recorder: RecordingHost, argv: list[str], output: Any) -> None:
        self.recorder, self.argv, self.output = recorder, argv, output
        path = recorder.out / "commands" / f"{command_key(argv)}.stdout"
        self.file = open_replacing(path, 0o600, binary=True)
        self.pending = bytearray()  # the line not yet ended
        self.written = 0

    @property
    def ended(self) -> str | None:
        return self.output.ended

    def readinto(self, view: Any) -> int:
        got = self.output.readinto(view)
        if got:
            self.pending += view[:got]
            cut = self.pending.rfind(b"\n") + 1
            if cut:
                self._write(bytes(self.pending[:cut]))
                del self.pending[:cut]
        return got

    def read(self, size: int = -1) -> bytes:
        buf = bytearray(1024 * 1024 if size < 0 else size)
        with memoryview(buf) as view:
            got = self.readinto(view)
        return bytes(buf[:got])

    def _write(self, data: bytes) -> None:
        data = redact_bytes(data)[:MAX_MEMBER_BYTES - self.written]  # "<redacted>" can be longer
        self.file.write(data)
        self.written += len(data)

    def finish(self) -> CommandRun:
        try:
            run = self.output.finish()
            if self.pending:
                self._write(bytes(self.pending))
                self.pending.clear()
        finally:
            self.file.close()
        self.recorder._record_run(self.argv, run, stdout=False)
        return run


def _safe_relative(path: str) -> str:
    """A host path as a path below the bundle's root/: its parts without "/", "." and "..". What pathlib
    makes of it (tests/test_startup.py compares), read as a string: a replay reads ~100 files."""
    parts = [p for p in path.split("/") if p not in ("", ".", "..")]
    if path[:2] == "//" and path[2:3] != "/":  # POSIX keeps exactly two leading slashes: a root of its own
        return "//" + "/".join(parts)
    return "/".join(parts) if parts else "_"


def _write_json(path: Path, data: Any) -> None:
    _write_private(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def _write_private(path: Path, data: bytes) -> None:
    """Write a bundle file readable by its owner only: a bundle shows how a host is set up."""
    write_file(path, data, 0o600)


def _private_dir(path: Path) -> None:
    """Create ``path`` (and parents inside the bundle) owner-only; an existing one must be ours, not a link."""
    make_directory(path, 0o700)
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # chmod of what was checked
    try:
        os.fchmod(descriptor, 0o700)
    finally:
        os.close(descriptor)


# --------------------------------------------------------------------------- redaction

_UUID = lazy_re(r"\b(GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_SERIALS = (
    lazy_re(r"Serial Number\s*:\s*(\w{6,})"),
    lazy_re(r"<serial>\s*(\w{6,})\s*</serial>"),
    lazy_re(r"serial number is (\w{6,})"),
    lazy_re(r'"serial":\s*"(\w{6,})"'),
)


def redact_bundle(directory: Path) -> None:
    """Replace the hostname, GPU/MIG UUIDs, board serial numbers, IP and MAC addresses and user names with
    stable placeholders (``redact.redact_host_text`` for the last three).

    The same value always gets the same placeholder, so a redacted bundle still shows which
    lines are about the same GPU, interface or user.
    """
    import hashlib

    from gpuhealth.redact import HostIdentifiers, redact_host_text

    texts = {p: p.read_text(encoding="utf-8", errors="replace")
             for p in directory.rglob("*") if p.is_file()}
    manifest = json.loads(texts[directory / "manifest.json"])
    replacements: dict[str, str] = {}
    if manifest.get("hostname"):
        replacements[manifest["hostname"]] = "host-redacted"
    for text in texts.values():
        for match in _UUID.finditer(text):
            value = match.group()
            if value not in replacements:
                digest = hashlib.sha256(value.encode()).hexdigest()
                replacements[value] = (f"{match[1]}-{digest[:8]}-0000-0000-0000-{digest[8:20]}")
        for pattern in _SERIALS:
            for match in pattern.finditer(text):
                serial = match[1]
                if serial not in replacements and not serial.isalpha():
                    replacements[serial] = f"SERIAL{len(replacements):04d}"
    pattern = re.compile("|".join(re.escape(k) for k in sorted(replacements, key=len, reverse=True))) \
        if replacements else None
    identifiers = HostIdentifiers()  # one for the bundle: an address keeps its placeholder across files
    for path, text in sorted(texts.items()):
        new = pattern.sub(lambda m: replacements[m.group()], text) if pattern is not None else text
        new = redact_host_text(new, identifiers)
        if new != text:
            write_file(path, new, 0o600)


# --------------------------------------------------------------------------- replay


class BundleHost:
    """Replays a bundle directory (or ``.tar.gz``) as if it were the host it was captured on."""

    parallel = False  # probes ask one thing at a time: answers are files, nothing hangs (collect.base)

    def __init__(self, location: str | Path) -> None:
        location = Path(location)
        self.source = location  # the archive a message should name, not its temporary unpacking
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if location.is_file():
            import tempfile

            self._tmp = tempfile.TemporaryDirectory(prefix="gpuhealth-bundle-")
            try:
                extract_archive(location, Path(self._tmp.name))
            except BaseException:
                self.close()
                raise
            location = _single_top(Path(self._tmp.name))
        if not location.is_dir():
            self.close()
            raise BundleError(f"{location}: not a bundle directory or .tar.gz archive")
        self.dir = location.resolve()
        # Directories below self.dir found not to be links (_resolve_stat). The bundle is read, never changed,
        # during a replay; a directory swapped for a link meanwhile could as well be swapped between any
        # check and the open that follows it.
        self._plain_dirs: set[str] = set()
        self._dir_text = str(self.dir)
        self._dir_prefix = os.path.join(self._dir_text, "")  # with its separator: "/b" is not below "/bundle"
        try:
            self.manifest = self._load_manifest()
        except BaseException:
            self.close()
            raise
        self._commands = {c["key"]: c for c in self.manifest["commands"]}
        self._recorded_keys = {tuple(c["argv"]): c["key"] for c in self.manifest["commands"] if "argv" in c}

    def _shown(self, relative: str) -> str:
        """A bundle file as a person knows it: inside the archive they gave, not our temporary copy."""
        return f"{self.source}:{relative}" if self._tmp is not None else str(self.dir / relative)

    def _load_manifest(self) -> dict[str, Any]:
        path = self._shown("manifest.json")
        try:
            manifest = load_json(self._inside(self.dir / "manifest.json"), MAX_MANIFEST_BYTES, "bundle manifest")
        except InputLimitError as exc:
            reason = str(exc).partition(": ")[2]
            raise BundleError(f"{path}: {reason} (not a readable gpuhealth bundle manifest)") from exc
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
            raise BundleError(f"{path}: not a gpuhealth bundle (format is not {FORMAT_NAME!r})")
        if not isinstance(manifest.get("version"), int) or manifest["version"] > FORMAT_VERSION:
            raise BundleError(f"{path}: bundle format version {_brief(manifest.get('version'))} is newer "
                              f"than this gpuhealth understands ({FORMAT_VERSION}); upgrade gpuhealth")
        problem = manifest_problem(manifest)
        if problem:
            raise BundleError(f"{path}: malformed bundle manifest: {problem}")
        return manifest

    def _inside(self, path: Path | str) -> str:
        """Refuse paths that resolve outside the bundle (links), non-regular files, huge files. Strings, not
        Paths: this runs for every file a replay reads (pathlib's parsing was ~3 % of `check --from`)."""
        path = os.fspath(path)
        resolved, found = self._resolve_stat(path)
        if resolved != self._dir_text and not resolved.startswith(self._dir_prefix):
            raise BundleError(f"{path}: leaves the bundle directory; refused")
        if found is None:
            try:
                found = os.stat(resolved)
            except OSError:
                return resolved  # not there: the caller's open says so
        if not stat.S_ISREG(found.st_mode):
            raise BundleError(f"{path}: not a regular file; refused")
        if found.st_size > MAX_MEMBER_BYTES:
            raise BundleError(f"{path}: larger than {MAX_MEMBER_BYTES} bytes; refused")
        return resolved

    def _resolve(self, path: str) -> str:
        """``Path(path).resolve()``, cheaper for the common case (see ``_resolve_stat``)."""
        return self._resolve_stat(path)[0]

    def _resolve_stat(self, path: str) -> tuple[str, os.stat_result | None]:
        """``Path(path).resolve()``, cheaper for the common case: a path below the (already resolved) bundle
        directory with no link and no ``..`` in its own part is itself. Only that part is looked at (one
        lstat per component, instead of one per component of the whole path), and a directory of the bundle
        found not to be a link is not looked at again during this replay (~100 files, in a few directories);
        anything else is resolved in full. ``path`` is as pathlib writes it (normalised). With the resolved
        path comes the lstat of its last component when that was not a link: its ``stat`` (one call less)."""
        if path == self._dir_text:
            return path, None
        if not path.startswith(self._dir_prefix):
            return str(Path(path).resolve()), None
        parts = path[len(self._dir_prefix):].split(os.sep)
        if ".." in parts:
            return str(Path(path).resolve()), None
        current = self._dir_text
        last = len(parts) - 1
        found = None
        for index, part in enumerate(parts):
            current = os.path.join(current, part)
            if index < last and current in self._plain_dirs:
                continue
            try:
                found = os.lstat(current)
            except FileNotFoundError:
                return path, None  # nothing below exists, so nothing below is a link: resolve() gives the path
            except OSError:
                return str(Path(path).resolve()), None
            if stat.S_ISLNK(found.st_mode):
                return str(Path(path).resolve()), None
            if index < last:
                self._plain_dirs.add(current)
        return current, found

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def evidence_of(self, probe: str) -> str:
        """Where a probe's evidence lies in this bundle, for an error message."""
        name = {"probe_nvml": "nvml.json", "probe_environment": "env.json",
                "probe_host_environment": "env.json, manifest.json"}.get(probe, "manifest.json, commands/, root/")
        return f"{self.source} ({name}, read by {probe})"

    @property
    def hostname(self) -> str | None:
        return self.manifest.get("hostname")

    @property
    def captured_at(self) -> str | None:
        return self.manifest.get("captured_at")

    def read(self, path: str) -> FileContent:
        entry = self.manifest.get("files", {}).get(path)
        if isinstance(entry, dict) and entry.get("error"):
            return FileContent(path, error=str(entry["error"]))
        target = os.path.join(self._dir_text, "root", _safe_relative(path))
        try:  # cut where a live read is cut
            return FileContent(path, read_file_capped(self._inside(target), MAX_READ_BYTES))
        except BundleError as exc:
            return FileContent(path, error=str(exc))
        except OSError:
            return FileContent(path, error="not captured in this bundle")

    def listdir(self, path: str) -> Listing:
        entry = self.manifest.get("listings", {}).get(path)
        if isinstance(entry, list):
            return Listing(path, tuple(str(n) for n in entry))
        if isinstance(entry, dict):
            return Listing(path, error=str(entry.get("error")))
        return Listing(path, error="not captured in this bundle")

    def readlink(self, path: str) -> str | None:
        target = self.manifest.get("links", {}).get(path)
        return target if isinstance(target, str) else None

    def stat(self, path: str) -> FileStat:
        entry = self.manifest.get("stats", {}).get(path)
        if not isinstance(entry, dict):
            return FileStat(path, error="not captured in this bundle")
        return FileStat(path, entry.get("mtime"), entry.get("size"), entry.get("is_dir"), entry.get("error"))

    def _key(self, argv: list[str]) -> str:
        """``command_key(argv)``; for a long command line, the key recorded beside the same argv when it has
        the right form, so a replay does not load hashlib (OpenSSL: ~2 % of `check --from`'s start-up)."""
        joined = " ".join(argv)
        readable = _readable_key(joined)
        if not _key_is_hashed(joined, readable):
            return readable
        recorded = self._recorded_keys.get(tuple(argv), "")
        if recorded.startswith(f"{readable}_") and len(recorded) == len(readable) + 9:
            return recorded
        return command_key(argv)

    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandRun:
        key = self._key(argv)
        entry = self._commands.get(key)
        if entry is None:
            return CommandRun(tuple(argv), None, error="not captured in this bundle")
        return CommandRun(
            tuple(argv), entry.get("exit_code"), self._text(f"commands/{key}.stdout"),
            self._text(f"commands/{key}.stderr"), float(entry.get("duration_s") or 0.0),
            bool(entry.get("timed_out")), entry.get("error"),
        )

    def stdout_file(self, argv: list[str]) -> tuple[CommandRun, Path | None]:
        """The command as replayed but without its stdout, and the file that holds the stdout (None when
        absent or refused): a large output (a kernel log) is scanned in place instead of read whole."""
        key = self._key(argv)
        entry = self._commands.get(key)
        if entry is None:
            return CommandRun(tuple(argv), None, error="not captured in this bundle"), None
        run = CommandRun(tuple(argv), entry.get("exit_code"), "", self._text(f"commands/{key}.stderr"),
                         float(entry.get("duration_s") or 0.0), bool(entry.get("timed_out")), entry.get("error"))
        try:
            path = self._inside(os.path.join(self._dir_text, "commands", f"{key}.stdout"))
        except BundleError:
            return run, None
        return run, Path(path) if os.path.isfile(path) else None

    def _text(self, relative: str) -> str:
        try:
            data = read_file_capped(self._inside(os.path.join(self._dir_text, relative)), MAX_OUTPUT_BYTES)
            return data.decode("utf-8", errors="replace")  # cut as a live run is
        except (OSError, BundleError):
            return ""

    def nvml(self) -> dict[str, Any]:
        data = self._json("nvml.json", MAX_NVML_JSON_BYTES, "NVML answer")
        if not isinstance(data, dict):
            return {"ok": False, "error": "NVML answer not captured in this bundle"}
        return data

    def environment(self) -> dict[str, str]:
        data = self._json("env.json", MAX_ENV_JSON_BYTES, "environment")
        if data is None:
            return {}
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise BundleError(f"{self._shown('env.json')}: malformed: not an object of strings")
        return data

    def _json(self, relative: str, max_bytes: int, what: str) -> Any:
        """A JSON file of the bundle, None when not captured; BundleError when past a limit or malformed."""
        path = self.dir / relative
        if not path.exists():
            return None
        try:
            return load_json(self._inside(path), max_bytes, what)
        except InputLimitError as exc:
            raise BundleError(f"{self._shown(relative)}: {str(exc).partition(': ')[2]}") from exc


_NUMBER = (int, float)
_OPTIONAL_STR = (str, type(None))
# field -> allowed types, for each kind of manifest entry (missing fields are fine: older bundles)
_COMMAND_FIELDS: dict[str, tuple[type, ...]] = {
    "key": (str,), "argv": (list,), "exit_code": (int, type(None)), "duration_s": (*_NUMBER, type(None)),
    "timed_out": (bool, type(None)), "error": _OPTIONAL_STR}
_FILE_FIELDS: dict[str, tuple[type, ...]] = {"bytes": (int, type(None)), "error": _OPTIONAL_STR}
_STAT_FIELDS: dict[str, tuple[type, ...]] = {
    "mtime": (*_NUMBER, type(None)), "size": (int, type(None)), "is_dir": (bool, type(None)), "error": _OPTIONAL_STR}
_TABLES = {"files": dict, "listings": dict, "links": dict, "stats": dict, "commands": list}


def manifest_problem(manifest: dict[str, Any]) -> str | None:
    """What is wrong with a manifest's types (None when fine); fills in missing tables as empty.

    Checked once here, so replay code can trust the types instead of failing deep inside a probe.
    """
    for name in ("hostname", "captured_at", "tool_version"):
        if not isinstance(manifest.get(name), _OPTIONAL_STR):
            return _wrong(name, manifest[name], "a string")
    for name, kind in _TABLES.items():
        manifest.setdefault(name, kind())
        if not isinstance(manifest[name], kind):
            return _wrong(name, manifest[name], "a list" if kind is list else "an object")
    for index, command in enumerate(manifest["commands"]):
        problem = _entry_problem(f"commands[{index}]", command, _COMMAND_FIELDS)
        if problem is None and "key" not in command:
            problem = f"`commands[{index}]` has no key"
        if problem is None and not all(isinstance(a, str) for a in command.get("argv", [])):
            problem = f"`commands[{index}].argv` holds a non-string"
        if problem:
            return problem
    for table, fields in (("files", _FILE_FIELDS), ("stats", _STAT_FIELDS)):
        for path, entry in manifest[table].items():
            problem = _entry_problem(f"{table}[{_brief(path, 60)!r}]", entry, fields)
            if problem:
                return problem
    for path, entry in manifest["listings"].items():
        ok = (isinstance(entry, list) and all(isinstance(n, str) for n in entry)) or isinstance(entry, dict)
        if not ok:
            return _wrong(f"listings[{_brief(path, 60)!r}]", entry, "a list of names or an error object")
    for path, target in manifest["links"].items():
        if not isinstance(target, _OPTIONAL_STR):
            return _wrong(f"links[{_brief(path, 60)!r}]", target, "a string")
    return None


def _entry_problem(where: str, entry: Any, fields: dict[str, tuple[type, ...]]) -> str | None:
    if not isinstance(entry, dict):
        return _wrong(where, entry, "an object")
    for name, kinds in fields.items():
        value = entry.get(name)
        # bool is an int to Python; a number field holding true is still wrong.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            return _wrong(f"{where}.{name}", value, "/".join(k.__name__ for k in kinds if k is not type(None)))
    return None


def _wrong(where: str, value: Any, expected: str) -> str:
    return f"`{where}` is {type(value).__name__} {_brief(json.dumps(value), 40)}, expected {expected}"


def _single_top(directory: Path) -> Path:
    """Archives usually hold one top folder; the bundle is that folder (or the root itself)."""
    if (directory / "manifest.json").exists():
        return directory
    entries = [p for p in directory.iterdir()]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return directory


def extract_archive(archive: Path, dest: Path) -> None:
    """Extract a bundle archive safely, refusing anything that could escape ``dest`` or exhaust memory.

    Two streaming passes: ``scan_archive`` reads the raw headers first and refuses oversized extended
    headers, too many members and too many bytes before ``tarfile`` (which reads a whole PAX or GNU
    long-name header into memory) sees any of them; then tarfile extracts.
    """
    import lzma
    import tarfile
    import zlib

    scan_archive(archive)
    try:
        with open(archive, "rb") as raw, tarfile.open(fileobj=raw, mode="r|*") as tar:
            _extract_members(archive, tar, dest)
    except BundleError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError) as exc:
        raise BundleError(f"{archive}: corrupt or truncated archive ({_brief(exc)})") from exc


def _extract_members(archive: Path, tar: tarfile.TarFile, dest: Path) -> None:
    import shutil

    total = 0
    for count, member in enumerate(tar, start=1):
        name = member.name
        if count > MAX_MEMBERS:
            raise BundleError(f"{archive}: more than {MAX_MEMBERS} members; refused")
        if name.startswith("/") or ".." in PurePosixPath(name).parts:
            raise BundleError(f"{archive}: member {_brief(name)!r} has an unsafe path; refused")
        if member.issym() or member.islnk():
            raise BundleError(f"{archive}: member {_brief(name)!r} is a link; refused")
        if member.isdir():
            _private_dir(dest / name)
            continue
        if not member.isfile():
            raise BundleError(f"{archive}: member {_brief(name)!r} is a device or special file; refused")
        if member.size > MAX_MEMBER_BYTES:
            raise BundleError(f"{archive}: member {_brief(name)!r} is larger than {MAX_MEMBER_BYTES} bytes")
        total += member.size
        if total > MAX_TOTAL_BYTES:
            raise BundleError(f"{archive}: unpacks to more than {MAX_TOTAL_BYTES} bytes; refused")
        source = tar.extractfile(member)
        if source is None:
            continue
        target = dest / name
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Not safefile: ``dest`` is a fresh private temporary directory (nobody else can plant a link there), and
        # an archive may repeat a member name, which a later copy replaces as tar does.
        with source, open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600),
                          "wb") as out:
            shutil.copyfileobj(source, out, 1024 * 1024)


_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
_EXTENDED_HEADERS = {b"x": "PAX", b"g": "PAX global", b"X": "PAX", b"L": "GNU long name", b"K": "GNU long link"}


def _open_decompressed(archive: Path) -> IO[bytes]:
    import bz2
    import gzip
    import lzma

    with open(archive, "rb") as handle:
        head = handle.read(6)
    kind = next((name for magic, name in _MAGIC if head.startswith(magic)), None)
    if kind == "gzip":
        return gzip.open(archive, "rb")
    if kind == "bzip2":
        return bz2.open(archive, "rb")
    if kind == "xz":
        # An xz header may ask for a 1.5 GiB dictionary; the decoder's memory is capped (xz -9 needs 65 MiB).
        # LZMAFile cannot pass ``memlimit``, so the reader is built as LZMAFile builds its own.
        import _compression

        raw = open(archive, "rb")  # noqa: SIM115 - closed with the reader it is wrapped in
        reader = _compression.DecompressReader(raw, lzma.LZMADecompressor, trailing_error=lzma.LZMAError,
                                               memlimit=MAX_XZ_MEMORY)
        return _ClosingReader(reader, raw)
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        raise BundleError(f"{archive}: zstd-compressed; unpack it first or use .tar.gz")
    return open(archive, "rb")


class _ClosingReader(io.BufferedReader):
    """A buffered decompressing reader that also closes the file under it."""

    def __init__(self, reader: Any, raw: IO[bytes]) -> None:
        super().__init__(reader)
        self._under = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._under.close()


def scan_archive(archive: Path) -> int:
    """Check a tar archive's raw headers (any compression) against the limits; the member count.

    Reads block by block and keeps one extended header at most, so an archive that decompresses to
    gigabytes of headers is refused after reading ``MAX_TAR_HEADER_BYTES`` of one.
    """
    import lzma
    import zlib

    try:
        with _open_decompressed(archive) as stream:
            return _scan(archive, stream)
    except BundleError:
        raise
    except lzma.LZMAError as exc:
        if "memory" in str(exc).lower():
            raise BundleError(f"{archive}: xz archive needs more than {MAX_XZ_MEMORY} bytes of decoder memory; "
                              "refused") from exc
        raise BundleError(f"{archive}: corrupt or truncated archive ({_brief(exc)})") from exc
    except (EOFError, OSError, zlib.error, ValueError) as exc:
        raise BundleError(f"{archive}: corrupt or truncated archive ({_brief(exc)})") from exc


def _scan(archive: Path, stream: IO[bytes]) -> int:
    members = total = chained = 0
    pax_size: int | None = None
    while True:
        first = members == 0 and chained == 0
        try:
            block = _read_exactly(stream, 512, archive)
            if block is None or block == bytes(512):
                if members == 0:
                    raise BundleError(f"{archive}: empty archive, not a bundle")
                return members
            kind = block[156:157]
            size = _header_size(archive, block)
        except BundleError as exc:
            if first:
                raise BundleError(f"{archive}: not a readable .tar.gz bundle (not a tar archive)") from exc
            raise
        if kind in _EXTENDED_HEADERS:
            chained += 1
            if size > MAX_TAR_HEADER_BYTES or chained > MAX_CHAINED_HEADERS:
                raise BundleError(f"{archive}: {_EXTENDED_HEADERS[kind]} header of {size} bytes (limit "
                                  f"{MAX_TAR_HEADER_BYTES}, {MAX_CHAINED_HEADERS} in a row); refused")
            data = _read_exactly(stream, _padded(size), archive)
            if data is None:
                raise BundleError(f"{archive}: truncated archive")
            found = re.search(rb"(?:^|\n)\d+ size=(\d{1,20})\n", data[:size]) if kind in (b"x", b"X") else None
            pax_size = int(found[1]) if found else pax_size
            continue
        size = pax_size if pax_size is not None else size
        chained, pax_size = 0, None
        members += 1
        if members > MAX_MEMBERS:
            raise BundleError(f"{archive}: more than {MAX_MEMBERS} members; refused")
        if kind not in (b"1", b"2", b"3", b"4", b"5", b"6"):  # as tarfile: only these carry no data blocks
            if size > MAX_MEMBER_BYTES:
                raise BundleError(f"{archive}: a member is larger than {MAX_MEMBER_BYTES} bytes ({size}); refused")
            total += size
            if total > MAX_TOTAL_BYTES:
                raise BundleError(f"{archive}: unpacks to more than {MAX_TOTAL_BYTES} bytes; refused")
            _skip(stream, _padded(size), archive)


def _header_size(archive: Path, block: bytes) -> int:
    """The size field of a tar header (octal, or GNU base-256), after checking the header checksum."""
    try:
        stored = int(block[148:156].replace(b"\x00", b" ").strip() or b"-1", 8)
    except ValueError:
        stored = -1
    unsigned = 256 + sum(block[:148]) + sum(block[156:])
    signed = unsigned - 256 * sum(1 for byte in block[:148] + block[156:] if byte > 127)  # old tars
    if stored not in (unsigned, signed):
        raise BundleError(f"{archive}: not a tar archive, or a corrupt one (bad header checksum)")
    field = block[124:136]
    if field[0] & 0x80:
        if field[0] != 0x80:
            raise BundleError(f"{archive}: a member with a negative or huge size; refused")
        return int.from_bytes(field[1:], "big")
    try:
        return int(field.replace(b"\x00", b" ").strip() or b"0", 8)
    except ValueError as exc:
        raise BundleError(f"{archive}: corrupt tar header (size {field!r})") from exc


def _padded(size: int) -> int:
    return (size + 511) // 512 * 512


def _read_exactly(stream: IO[bytes], size: int, archive: Path) -> bytes | None:
    """``size`` bytes, None at a clean end; a short read inside is a truncated archive."""
    data = stream.read(size)
    if not data:
        return None
    if len(data) < size:
        raise BundleError(f"{archive}: truncated archive")
    return data


def _skip(stream: IO[bytes], size: int, archive: Path) -> None:
    while size:
        chunk = stream.read(min(size, 1024 * 1024))
        if not chunk:
            raise BundleError(f"{archive}: truncated archive")
        size -= len(chunk)


def _brief(value: object, limit: int = 200) -> str:
    """Untrusted text in a message, cut: a member name can be megabytes long."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def write_archive(directory: Path, archive: Path) -> Path:
    """Pack a bundle directory into ``archive`` (.tar.gz) under one top folder."""
    import tarfile

    top = archive.name.removesuffix(".tar.gz")
    with create_new(archive, 0o600) as handle, tarfile.open(fileobj=handle, mode="w:gz") as tar:  # never overwrite
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                info = tar.gettarinfo(str(path), arcname=f"{top}/{path.relative_to(directory)}")
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with open(path, "rb") as handle:
                    tar.addfile(info, io.BufferedReader(handle))
    return archive


def is_bundle(path: Path) -> bool:
    return (path.is_dir() and (path / "manifest.json").is_file()) or (
        path.is_file() and path.name.endswith((".tar.gz", ".tgz")))
