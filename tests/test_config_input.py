"""`--config` files get the checks evidence gets (issue 25 item 17, issue 24 item 8): `check --config /dev/zero` ran
out of memory, a FIFO with no writer hung it, and invalid UTF-8 gave an error without the file's name.

Both loaders (check's expectations, gpuhealth.config; monitor/serve/watch/history/usage's, gpuhealth.monitor.config)
read through ``evidence_input.read_config_text``: a device is refused before anything is read, a FIFO must
deliver in time, the size is bounded before and while reading, and every error is one line naming the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from gpuhealth.cli import main
from gpuhealth.config import load_expectations
from gpuhealth.evidence_input import MAX_CONFIG_BYTES, InputError, read_config_text
from gpuhealth.monitor.config import load_config
from repo_paths import REPO

BUNDLE = str(REPO / "examples/h100x8-xid-ecc.tar.gz")


def gpuhealth(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuhealth", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def one_line_naming(result, path: str, why: str) -> None:
    assert result.returncode == 3, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and why in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_a_device_is_refused_before_it_is_read():
    started = time.monotonic()
    one_line_naming(gpuhealth("check", "--from", BUNDLE, "--config", "/dev/zero"), "/dev/zero", "character device")
    one_line_naming(gpuhealth("history", "--config", "/dev/zero", "--db", "/nonexistent.db"), "/dev/zero",
                    "character device")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("command", [["check", "--from", BUNDLE], ["history", "--db", "/nonexistent.db"]])
def test_invalid_utf8_is_an_error_naming_the_file(tmp_path, command):
    path = tmp_path / "gpuhealth.toml"
    path.write_bytes(b"gpu_count = 8\n# caf\xe9\n")  # Latin-1
    one_line_naming(gpuhealth(*command, "--config", str(path)), str(path), "not UTF-8 text (byte 0xe9 at offset 19)")


def test_a_config_over_the_size_limit_is_refused(tmp_path):
    path = tmp_path / "huge.toml"
    path.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    for loader in (load_expectations, load_config):
        with pytest.raises(ValueError, match=rf"{path}: 1\.0 MiB, over the 1 MiB limit for a config file"):
            loader(path)
    result = CliRunner().invoke(main, ["check", "--from", BUNDLE, "--config", str(path)])
    assert result.exit_code == 3 and str(path) in result.output


def _fifo(tmp_path, name: str = "config.fifo"):
    path = tmp_path / name
    os.mkfifo(path)
    return path


def test_a_fifo_with_no_writer_times_out(tmp_path):
    path = _fifo(tmp_path)
    started = time.monotonic()
    with pytest.raises(InputError, match=rf"{path}: a FIFO with no data after 0.3 s"):
        read_config_text(path, open_timeout=0.3)
    assert time.monotonic() - started < 5


def _write_in_background(path, data: bytes, forever: bool = False) -> threading.Thread:
    def write() -> None:
        try:
            with open(path, "wb") as fifo:
                fifo.write(data)
                while forever:
                    fifo.write(data)
        except BrokenPipeError:  # the reader stopped at its limit
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_fifo_is_read_and_an_endless_one_stops_at_the_limit(tmp_path):
    path = _fifo(tmp_path)
    writer = _write_in_background(path, b"gpu_count = 4\n")
    assert load_expectations(path).gpu_count == 4
    writer.join(5)
    endless = _fifo(tmp_path, "endless.fifo")
    _write_in_background(endless, b"# " * 32768, forever=True)
    with pytest.raises(ValueError, match=rf"{endless}: more than 1 MiB, over the limit for a config file"):
        load_config(endless)


def test_a_utf8_byte_order_mark_is_allowed_and_utf16_is_named(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbfgpu_count = 2\n")
    assert load_expectations(path).gpu_count == 2
    path.write_bytes("gpu_count = 2\n".encode("utf-16"))
    with pytest.raises(ValueError, match=rf"{path}: not UTF-8 text .*\(UTF-16 text: save it as UTF-8\)"):
        load_expectations(path)
