"""The wheel: built from this checkout, installed into a fresh venv, it runs `checks` and `analyze` on real
evidence, ships its data files and the LICENSE, and declares the runtime dependencies of pyproject.toml.
`make install` puts it in a venv of its own linked onto PATH, where every command of deploy/ runs; pipx
and `uv tool` install the wheel too, where they are present.

The fresh venv gets the wheel (not the source tree) and sees the test venv's site-packages only as a plain
path (a .pth line), so the runtime dependencies come from there without a download and the editable install
of the test venv stays invisible; the test asserts gpuhealth is imported from the fresh venv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
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


def _venv_with_test_deps(root: Path) -> Path:
    """A venv at ROOT that sees the test venv's runtime dependencies (no download) but not its gpuhealth."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True, timeout=30).stdout.strip())
    # the runtime dependencies, already installed in the test venv: a path, so its .pth files are not run
    (site / "test-venv-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return root


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory) -> Path:
    root = _venv_with_test_deps(tmp_path_factory.mktemp("venv") / "env")
    python = root / "bin" / "python"
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


def _check_the_shipped_bundle(gpuhealth: Path, cwd: Path, env: dict[str, str] | None = None) -> None:
    """`--version` and the README's example, run by an installed copy outside the clone."""
    version = subprocess.run([str(gpuhealth), "--version"], capture_output=True, text=True, timeout=60, cwd=cwd,
                             env=env)
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version.returncode == 0 and version.stdout.strip().endswith(declared), version
    bundle = REPO / "examples" / "h100x8-xid-ecc.tar.gz"
    checked = subprocess.run([str(gpuhealth), "check", "--from", str(bundle)], capture_output=True, text=True,
                             timeout=60, cwd=cwd, env=env)
    assert checked.returncode == 2, checked.stderr  # the example's double-bit ECC error is critical
    assert checked.stdout.lstrip().startswith("BROKEN") and "CRITICAL GH301" in checked.stdout


def test_installed_wheel_answers_version_and_checks_the_shipped_bundle(fresh_venv: Path, tmp_path: Path):
    _check_the_shipped_bundle(fresh_venv / "bin" / "gpuhealth", tmp_path)


@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_pipx_or_uv_tool_installs_the_wheel(tool: str, wheel: Path, tmp_path: Path):
    """Where pipx or uv is installed (it fetches the dependencies from the package index)."""
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed here")
    bin_dir = tmp_path / "bin"
    env = {**os.environ, "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(bin_dir),
           "UV_TOOL_DIR": str(tmp_path / "uv"), "UV_TOOL_BIN_DIR": str(bin_dir)}
    command = [tool, "install", str(wheel)] if tool == "pipx" else [tool, "tool", "install", str(wheel)]
    subprocess.run(command, check=True, capture_output=True, timeout=300, env=env, cwd=tmp_path)
    _check_the_shipped_bundle(bin_dir / "gpuhealth", tmp_path, env)


# Every place in deploy/ and docs/ that runs the installed command, with its arguments up to the shell's
# next operator, quote, variable or line continuation.
INSTALLED = "/usr/local/bin/gpuhealth"
DEPLOY_COMMAND = re.compile(re.escape(INSTALLED) + r"((?:[ \t]+[^\s>|&;\"'$\\)]+)*)")


def _deploy_commands() -> list[tuple[str, list[str]]]:
    import click

    from gpuhealth.cli import main

    files = [p for p in (REPO / "deploy").rglob("*") if p.is_file() and p.suffix != ".json"]
    files += [p for p in (REPO / "docs").rglob("*.md") if "checks" not in p.parts]
    commands = set(main.list_commands(click.Context(main)))
    found = [(str(p.relative_to(REPO)), match.split()) for p in files
             for match in DEPLOY_COMMAND.findall(p.read_text(encoding="utf-8"))
             if match.split()[:1] and match.split()[0] in commands]  # not prose ("gpuhealth exists")
    plugin = REPO / "deploy" / "kubernetes" / "npd-gpuhealth-plugin.json"
    found += [(str(plugin.relative_to(REPO)), rule["args"]) for rule in json.loads(plugin.read_text())["rules"]
              if rule["path"] == INSTALLED]
    nhc = REPO / "deploy" / "slurm" / "gpuhealth-nhc.sh"  # runs "$GPUHEALTH", /usr/local/bin/gpuhealth by default
    text = nhc.read_text()
    if '"$GPUHEALTH" "${args[@]}"' in text:  # the arguments in an array: args=(check --format nhc ...)
        found += [(str(nhc.relative_to(REPO)), match.replace('"$COMMAND_TIMEOUT_S"', "10").split())
                  for match in re.findall(r"^args=\((check [^)]*)\)$", text, re.M)]
    return found


def test_deploy_files_run_the_path_make_install_links_as_root():
    commands = _deploy_commands()
    named = {path for path, _ in commands}
    for unit in ("gpuhealth-check.service", "gpuhealth-monitor.service", "gpuhealth-serve.service"):
        assert f"deploy/systemd/{unit}" in named
    assert {"deploy/kubernetes/npd-gpuhealth-plugin.json", "docs/prometheus-textfile.md", "docs/slurm-nhc.md",
            "deploy/slurm/gpuhealth-nhc.sh"} <= named  # NPD's plugin, the cron line, NHC's check, our NHC script
    nhc = (REPO / "deploy" / "slurm" / "gpuhealth-nhc.sh").read_text()
    assert f"GPUHEALTH=${{GPUHEALTH:-{INSTALLED}}}" in nhc
    # nothing in deploy/ runs gpuhealth from any other absolute path
    for path in (REPO / "deploy").rglob("*"):
        if path.is_file():
            others = set(re.findall(r"/[\w./-]*/bin/gpuhealth\b", path.read_text(encoding="utf-8")))
            assert others <= {INSTALLED, "/opt/gpuhealth/venv/bin/gpuhealth"}, (path, others)
    if shutil.which("make") is None:
        pytest.skip("make is not installed here")
    dry = subprocess.run(["make", "-n", "install", "HOME=/home/someone"], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    if os.geteuid() == 0:
        assert f"ln -sfn /opt/gpuhealth/venv/bin/gpuhealth {INSTALLED}" in dry
    else:
        assert ("ln -sfn /home/someone/.local/share/gpuhealth/venv/bin/gpuhealth "
                "/home/someone/.local/bin/gpuhealth") in dry


def test_make_install_into_a_temporary_prefix_runs_every_deploy_command(wheel: Path, tmp_path: Path):
    """`make install` with INSTALL_VENV/INSTALL_BIN: a venv of its own, the link, and through that link every
    command that deploy/ and docs/ run from /usr/local/bin/gpuhealth parses (its options exist there)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed here")
    target = _venv_with_test_deps(tmp_path / "venv")  # make keeps an existing venv; the wheel comes offline
    bin_dir = tmp_path / "bin"
    installed = subprocess.run(
        ["make", "install", f"INSTALL_VENV={target}", f"INSTALL_BIN={bin_dir}", f"INSTALL_FROM={wheel}",
         "INSTALL_PIP_FLAGS=--no-deps --no-index --force-reinstall",
         f"PYTHON={sys.executable}"],
        cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    link = bin_dir / "gpuhealth"
    assert link.is_symlink() and link.resolve() == (target / "bin" / "gpuhealth").resolve()
    assert f"{bin_dir} is not on PATH" in installed.stdout  # said, not left to be found out
    _check_the_shipped_bundle(link, tmp_path)
    for where, args in _deploy_commands():
        ran = subprocess.run([str(link), *args, "--help"], capture_output=True, text=True, timeout=60,
                             cwd=tmp_path)
        assert ran.returncode == 0, (where, args, ran.stderr)


def test_make_dist_builds_a_wheel_and_an_sdist_with_the_licence(tmp_path):
    """`make dist` (PyPA build, from the sdist: what the sdist lacks, the wheel lacks too)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed here")
    out = tmp_path / "dist"
    stamp = tmp_path / "runtime-installed"  # newer than pyproject.toml: make takes this venv as set up
    stamp.touch()
    built = subprocess.run(["make", "dist", f"DIST={out}", f"BIN={Path(sys.executable).parent}", f"RUNTIME={stamp}"],
                           cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT * 2)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = out.glob("gpuhealth-*-py3-none-any.whl")
    (sdist,) = out.glob("gpuhealth-*.tar.gz")
    licence = (REPO / "LICENSE").read_bytes()
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"{wheel.name.split('-py3')[0]}.dist-info/licenses/LICENSE") == licence
        assert any(n.startswith("gpuhealth/knowledge/_tables/") for n in archive.namelist())
    import tarfile

    with tarfile.open(sdist) as archive:
        root = sdist.name.removesuffix(".tar.gz")
        assert archive.extractfile(f"{root}/LICENSE").read() == licence
        assert f"{root}/pyproject.toml" in archive.getnames()


def test_make_install_in_a_fresh_clone_then_the_readme_commands_work(tmp_path):
    """The route a new user takes: clone, `make install` (dependencies from the package index, as `pip
    wheel` above builds in an isolated env from it), then bare commands of the README through the link."""
    if shutil.which("make") is None or shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("make or git is not installed here, or this tree is no git clone")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, capture_output=True, timeout=120)
    venv_dir, bin_dir = tmp_path / "venv", tmp_path / "bin"
    installed = subprocess.run(["make", "install", f"INSTALL_VENV={venv_dir}", f"INSTALL_BIN={bin_dir}",
                                f"PYTHON={sys.executable}"], cwd=clone, capture_output=True, text=True,
                               timeout=BUILD_TIMEOUT * 3)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("VIRTUAL_ENV", None)

    def gpuhealth(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["gpuhealth", *args], capture_output=True, text=True, timeout=60, cwd=clone, env=env)

    assert gpuhealth("--version").returncode == 0
    where = subprocess.run(["sh", "-c", "command -v gpuhealth"], capture_output=True, text=True, env=env).stdout
    assert where.strip() == str(bin_dir / "gpuhealth")  # the bare command is the installed one
    checked = gpuhealth("check", "--from", "examples/h100x8-xid-ecc.tar.gz")
    assert checked.returncode == 2 and "CRITICAL GH301" in checked.stdout, checked.stderr
    assert gpuhealth("explain", "GH301").returncode == 0
    analyzed = gpuhealth("analyze", "tests/cases/dev/module-not-built-dkms-reinstall/session.txt")
    assert analyzed.returncode == 2 and "GH203" in analyzed.stdout, analyzed.stderr
