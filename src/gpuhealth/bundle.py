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

import hashlib
import io
import json
import re
import shutil
import tarfile
import tempfile
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

from gpuhealth import __version__
from gpuhealth.host import DEFAULT_TIMEOUT_S, FileContent, FileStat, Host, Listing
from gpuhealth.model import CommandRun

FORMAT_NAME = "gpuhealth-bundle"
FORMAT_VERSION = 1
MAX_MEMBER_BYTES = 128 * 1024 * 1024
MAX_TOTAL_BYTES = 1024 * 1024 * 1024
MAX_MEMBERS = 20_000
SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASS", "CREDENTIAL", "AUTH")
REDACTED = "<redacted>"


class BundleError(Exception):
    """A bundle that cannot be used: the message names the file and the reason."""


def command_key(argv: list[str] | tuple[str, ...]) -> str:
    """A stable file-name-safe key for a command line."""
    joined = " ".join(argv)
    key = re.sub(r"[^A-Za-z0-9._=-]+", "_", joined).strip("_.")[:80]
    if len(joined) > 80 or not key:
        key = f"{key}_{hashlib.sha1(joined.encode()).hexdigest()[:8]}"
    return key


def redact_environment(env: dict[str, str]) -> dict[str, str]:
    return {name: REDACTED if any(m in name.upper() for m in SECRET_MARKERS) else value
            for name, value in sorted(env.items())}


# --------------------------------------------------------------------------- recording


class RecordingHost:
    """Wraps a live host and records every answer into ``out_dir`` (thread-safe)."""

    def __init__(self, inner: Host, out_dir: str | Path, hostname: str | None = None) -> None:
        self.inner = inner
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
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
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(result.data)
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
        key = command_key(argv)
        with self._lock:
            commands = self.out / "commands"
            commands.mkdir(exist_ok=True)
            (commands / f"{key}.stdout").write_text(result.stdout, encoding="utf-8")
            (commands / f"{key}.stderr").write_text(result.stderr, encoding="utf-8")
            self._manifest["commands"].append({
                "key": key, "argv": list(argv), "exit_code": result.exit_code,
                "duration_s": result.duration_s, "timed_out": result.timed_out, "error": result.error,
            })
        return result

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
        return self.out


def _safe_relative(path: str) -> str:
    parts = [p for p in PurePosixPath(path).parts if p not in ("/", "", ".", "..")]
    return str(PurePosixPath(*parts)) if parts else "_"


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- redaction

_UUID = re.compile(r"\b(GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_SERIALS = (
    re.compile(r"Serial Number\s*:\s*(\w{6,})"),
    re.compile(r"<serial>\s*(\w{6,})\s*</serial>"),
    re.compile(r"serial number is (\w{6,})"),
    re.compile(r'"serial":\s*"(\w{6,})"'),
)


def redact_bundle(directory: Path) -> None:
    """Replace the hostname, GPU/MIG UUIDs and board serial numbers with stable placeholders.

    The same value always gets the same placeholder, so a redacted bundle still shows which
    lines are about the same GPU.
    """
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
    if not replacements:
        return
    pattern = re.compile("|".join(re.escape(k) for k in sorted(replacements, key=len, reverse=True)))
    for path, text in texts.items():
        new = pattern.sub(lambda m: replacements[m.group()], text)
        if new != text:
            path.write_text(new, encoding="utf-8")


# --------------------------------------------------------------------------- replay


class BundleHost:
    """Replays a bundle directory (or ``.tar.gz``) as if it were the host it was captured on."""

    def __init__(self, location: str | Path) -> None:
        location = Path(location)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if location.is_file():
            self._tmp = tempfile.TemporaryDirectory(prefix="gpuhealth-bundle-")
            extract_archive(location, Path(self._tmp.name))
            location = _single_top(Path(self._tmp.name))
        if not location.is_dir():
            raise BundleError(f"{location}: not a bundle directory or .tar.gz archive")
        self.dir = location.resolve()
        self.manifest = self._load_manifest()
        self._commands = {c.get("key"): c for c in self.manifest.get("commands", [])
                          if isinstance(c, dict)}

    def _load_manifest(self) -> dict[str, Any]:
        path = self.dir / "manifest.json"
        try:
            manifest = json.loads(self._inside(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BundleError(f"{path}: not a readable gpuhealth bundle manifest ({exc})") from exc
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
            raise BundleError(f"{path}: not a gpuhealth bundle (format is not {FORMAT_NAME!r})")
        if not isinstance(manifest.get("version"), int) or manifest["version"] > FORMAT_VERSION:
            raise BundleError(f"{path}: bundle format version {manifest.get('version')!r} is newer "
                              f"than this gpuhealth understands ({FORMAT_VERSION}); upgrade gpuhealth")
        return manifest

    def _inside(self, path: Path) -> Path:
        """Refuse paths that resolve outside the bundle (links), non-regular files, huge files."""
        resolved = path.resolve()
        if self.dir not in resolved.parents and resolved != self.dir:
            raise BundleError(f"{path}: leaves the bundle directory; refused")
        if resolved.exists() and not resolved.is_file():
            raise BundleError(f"{path}: not a regular file; refused")
        if resolved.exists() and resolved.stat().st_size > MAX_MEMBER_BYTES:
            raise BundleError(f"{path}: larger than {MAX_MEMBER_BYTES} bytes; refused")
        return resolved

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

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
        target = self.dir / "root" / _safe_relative(path)
        try:
            return FileContent(path, self._inside(target).read_bytes())
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

    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandRun:
        key = command_key(argv)
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
        key = command_key(argv)
        entry = self._commands.get(key)
        if entry is None:
            return CommandRun(tuple(argv), None, error="not captured in this bundle"), None
        run = CommandRun(tuple(argv), entry.get("exit_code"), "", self._text(f"commands/{key}.stderr"),
                         float(entry.get("duration_s") or 0.0), bool(entry.get("timed_out")), entry.get("error"))
        try:
            path = self._inside(self.dir / f"commands/{key}.stdout")
        except BundleError:
            return run, None
        return run, path if path.is_file() else None

    def _text(self, relative: str) -> str:
        try:
            return self._inside(self.dir / relative).read_text(encoding="utf-8", errors="replace")
        except (OSError, BundleError):
            return ""

    def nvml(self) -> dict[str, Any]:
        try:
            data = json.loads(self._text("nvml.json") or "null")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return {"ok": False, "error": "NVML answer not captured in this bundle"}
        return data

    def environment(self) -> dict[str, str]:
        try:
            data = json.loads(self._text("env.json") or "{}")
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _single_top(directory: Path) -> Path:
    """Archives usually hold one top folder; the bundle is that folder (or the root itself)."""
    if (directory / "manifest.json").exists():
        return directory
    entries = [p for p in directory.iterdir()]
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return directory


def extract_archive(archive: Path, dest: Path) -> None:
    """Extract a bundle archive safely, refusing anything that could escape ``dest``."""
    try:
        tar = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise BundleError(f"{archive}: not a readable .tar.gz bundle ({exc})") from exc
    total = 0
    with tar:
        for count, member in enumerate(tar, start=1):
            name = member.name
            if count > MAX_MEMBERS:
                raise BundleError(f"{archive}: more than {MAX_MEMBERS} members; refused")
            if name.startswith("/") or ".." in PurePosixPath(name).parts:
                raise BundleError(f"{archive}: member {name!r} has an unsafe path; refused")
            if member.issym() or member.islnk():
                raise BundleError(f"{archive}: member {name!r} is a link; refused")
            if member.isdir():
                (dest / name).mkdir(parents=True, exist_ok=True)
                continue
            if not member.isfile():
                raise BundleError(f"{archive}: member {name!r} is a device or special file; refused")
            if member.size > MAX_MEMBER_BYTES:
                raise BundleError(f"{archive}: member {name!r} is larger than {MAX_MEMBER_BYTES} bytes")
            total += member.size
            if total > MAX_TOTAL_BYTES:
                raise BundleError(f"{archive}: unpacks to more than {MAX_TOTAL_BYTES} bytes; refused")
            source = tar.extractfile(member)
            if source is None:
                continue
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)


def write_archive(directory: Path, archive: Path) -> Path:
    """Pack a bundle directory into ``archive`` (.tar.gz) under one top folder."""
    top = archive.name.removesuffix(".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
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

