"""The wheel: built from this checkout, installed into a fresh venv, it runs `checks` and `analyze` on real
evidence, ships its data files and the LICENSE, and declares the runtime dependencies of pyproject.toml.

The fresh venv gets the wheel (not the source tree) and sees the test venv's site-packages only as a plain
path (a .pth line), so the runtime dependencies come from there without a download and the editable install
of the test venv stays invisible; the test asserts gpuhealth is imported from the fresh venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import time
import venv
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10: the backport, a runtime dependency there
    import tomli as tomllib

from conftest import CORPUS, REPO

BUILD_TIMEOUT = 120  # pip builds in an isolated env; seconds, a deadline not a goal


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=BUILD_TIMEOUT)
    (built,) = out.glob("gpuhealth-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True, timeout=30).stdout.strip())
    # the runtime dependencies, already installed in the test venv: a path, so its .pth files are not run
    (site / "test-venv-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--quiet", str(wheel)], check=True, capture_output=True, timeout=BUILD_TIMEOUT)
    return root


def _run(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(root / "bin" / "gpuhealth"), *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


def test_wheel_ships_license_and_data(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        license_name = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        assert archive.read(license_name) == (REPO / "LICENSE").read_bytes()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "License-Expression: Apache-2.0" in metadata
    for data in ("gpuhealth/knowledge/xid.csv", "gpuhealth/monitor/defaults.toml", "gpuhealth/web/static/index.html"):
        assert data in names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    required = [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line]
    assert sorted(r.split(";")[0].replace(" ", "") for r in required) == sorted(
        d.split(";")[0].replace(" ", "") for d in declared)


def test_installed_wheel_runs_checks_and_analyze(fresh_venv: Path, tmp_path: Path):
    started = time.monotonic()
    where = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", "import gpuhealth; print(gpuhealth.__file__)"],
                           capture_output=True, text=True, timeout=30, cwd=tmp_path, check=True).stdout
    assert Path(where.strip()).resolve().is_relative_to(fresh_venv.resolve()), where  # the wheel, not the source tree

    checks = _run(fresh_venv, "checks", cwd=tmp_path)
    assert checks.returncode == 0, checks.stderr
    assert "GH301" in checks.stdout and "xid-errors" in checks.stdout

    log = CORPUS / "gpud" / "query_log_tail__dmesg.0.log"
    analyzed = _run(fresh_venv, "analyze", str(log), "--format", "json", cwd=tmp_path)
    assert analyzed.returncode == 2, analyzed.stderr
    findings = json.loads(analyzed.stdout)["findings"]
    assert any(f["code"] == "GH301" and f["message"].startswith("Xid 48") for f in findings)
    assert time.monotonic() - started < 30
