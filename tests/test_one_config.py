"""One configuration (issue 24 item 3): one `--config` file drives check, monitor and serve; the old files
are still read with a one-line deprecation; `gpuhealth config show` prints the merged result with where each
value came from; unknown keys and bad values exit 3 with one line naming the key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuhealth import config as config_module
from gpuhealth.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = str(ROOT / "examples" / "h100x8-xid-ecc.tar.gz")  # 8 GPUs
TRACE = str(ROOT / "examples" / "h100x8.trace")  # 8 GPUs between 61 and 72 °C at the start

ONE_FILE = """
[check]
gpu_count = 9                # one more than the bundle and the trace have

[rules.temperature]
threshold_c = 60             # the trace's GPUs are over this from the start; the default 85 is not reached

[notify]
stderr = true

[serve]
listen = "0.0.0.0:9835"      # anything but loopback needs a token: serve refuses before binding
"""


@pytest.fixture(autouse=True)
def no_host_files(tmp_path, monkeypatch):
    """The host's own /etc and ~/.config files are not part of any test: each layer points into tmp_path."""
    monkeypatch.setattr(config_module, "SYSTEM_PATH", tmp_path / "etc" / "gpuhealth" / "config.toml")
    monkeypatch.setattr(config_module, "OLD_SYSTEM_PATH", tmp_path / "etc" / "gpuhealth.toml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _codes(output: str) -> set[str]:
    return {finding["code"] for finding in json.loads(output)["findings"]}


def test_one_file_drives_check_monitor_and_serve(tmp_path):
    config = str(_write(tmp_path / "gpuhealth.toml", ONE_FILE))
    runner = CliRunner()
    # check: the [check] expectation fires (GH103: fewer GPUs than expected); without the file it does not
    result = runner.invoke(main, ["check", "--from", BUNDLE, "--format", "json", "--config", config])
    assert "GH103" in _codes(result.stdout)
    assert "GH103" not in _codes(runner.invoke(main, ["check", "--from", BUNDLE, "--format", "json"]).stdout)
    # monitor: the rule threshold and the same expected GPU count, from the same file
    args = ["monitor", "--source", f"replay:{TRACE}", "--replay-speed", "0", "--check-every", "0",
            "--db", str(tmp_path / "history.db")]
    result = runner.invoke(main, [*args, "--config", config])
    assert result.exit_code == 0, result.output
    assert "FIRING warning temperature gpu=0: GPU 0 at 61.6 °C (alert at 60 °C" in result.stderr
    assert "FIRING critical gpu_count host: 8 GPU(s) answering, 9 expected" in result.stderr
    plain = runner.invoke(main, args).stderr
    assert "temperature gpu=0" not in plain and "gpu_count" not in plain
    # serve: [serve] listen from the file (0.0.0.0 without a token is refused before anything starts)
    result = runner.invoke(main, ["serve", "--source", f"replay:{TRACE}", "--config", config])
    assert result.exit_code == 3 and "refusing to listen on 0.0.0.0 without a token" in result.stderr
    # a flag still wins over the file
    result = runner.invoke(main, ["check", "--from", BUNDLE, "--format", "json", "--config", config,
                                  "--gpu-count", "8"])
    assert "GH103" not in _codes(result.stdout)


def test_the_old_expectations_file_is_read_with_one_deprecation_line(tmp_path):
    _write(config_module.OLD_SYSTEM_PATH, "gpu_count = 9\n")
    result = CliRunner().invoke(main, ["check", "--from", BUNDLE, "--format", "json"])
    assert "GH103" in _codes(result.stdout)
    (line,) = result.stderr.splitlines()
    assert line == (f"gpuhealth: {config_module.OLD_SYSTEM_PATH} is deprecated: move its keys under [check] in "
                    f"{config_module.SYSTEM_PATH} (see `gpuhealth config show`)")


def test_the_old_layouts_in_a_config_file_are_read_with_one_line_each(tmp_path):
    old = str(_write(tmp_path / "old.toml", "nvlink_count = 18\n[rules.gpu_count]\nexpected = 9\n"))
    result = CliRunner().invoke(main, ["check", "--from", BUNDLE, "--format", "json", "--config", old])
    assert "GH103" in _codes(result.stdout)  # the monitor's old key is the one expected GPU count now
    assert result.stderr.splitlines() == [
        f"gpuhealth: {old}: top-level nvlink_count is the old expectations layout, deprecated: write it under "
        "[check]",
        f"gpuhealth: {old}: rules.gpu_count.expected is deprecated: write check.gpu_count (one expected GPU count "
        "for check and monitor)"]
    settings = config_module.load(Path(old), warn=lambda _text: None)
    assert settings.rules()["gpu_count"]["expected"] == 9 and settings["check"]["nvlink_count"] == 18
    _write(tmp_path / "both.toml", "[check]\ngpu_count = 8\n[rules.gpu_count]\nexpected = 9\n")
    with pytest.raises(ValueError, match=r"rules.gpu_count.expected = 9 and check.gpu_count = 8 disagree"):
        config_module.load(tmp_path / "both.toml", warn=lambda _text: None)


def test_config_show_prints_the_merged_result_with_each_source(tmp_path):
    system = _write(config_module.SYSTEM_PATH, "[check]\ngpu_count = 8\n[monitor]\ninterval = \"5s\"\n")
    user = _write(tmp_path / "xdg" / "gpuhealth" / "config.toml", "[monitor]\ninterval = \"2s\"\n")
    given = _write(tmp_path / "given.toml", '[check.models."NVIDIA H100 80GB HBM3"]\nnvlink_count = 16\n'
                                            '[serve]\nlisten = "127.0.0.1:9900"\n')
    result = CliRunner().invoke(main, ["config", "show", "--config", str(given)])
    assert result.exit_code == 0, result.output
    rows = {line.split(" = ")[0]: line for line in result.stdout.splitlines() if " = " in line}
    assert rows["gpu_count"].endswith(f"# system file {system}")
    assert rows["interval"].endswith(f"# user file {user}")  # the user file over the system file
    assert rows['models."NVIDIA H100 80GB HBM3".nvlink_count'].endswith(f"# --config {given}")
    assert rows["listen"].endswith(f"# --config {given}") and rows["check_every"].endswith("# default")
    shown = tomllib.loads(result.stdout)  # the output reads back as the same configuration
    merged = config_module.load(given).values
    assert shown == merged
    assert shown["check"] == {"gpu_count": 8, "models": {"NVIDIA H100 80GB HBM3": {"nvlink_count": 16}}}
    assert shown["monitor"]["interval"] == "2s" and shown["serve"]["listen"] == "127.0.0.1:9900"
    assert max(map(len, result.stdout.splitlines())) <= 80 + len(str(tmp_path)) * 2


@pytest.mark.parametrize("text, message", [
    ("[check]\ngpus = 8\n", "[check]: unknown key(s) gpus"),
    ("gpus = 8\n", "unknown key(s) gpus; known: [check], [monitor]"),
    ("[monitor]\nintervall = \"1s\"\n", "monitor: unknown key 'intervall'"),
    ("[rules.temperature]\nthreshold = 80\n", "rules.temperature: unknown key 'threshold'"),
    ("[serve]\nport = 80\n", "serve: unknown key 'port'"),
    ("[monitor]\ninterval = \"0s\"\n", "monitor.interval: '0s' is out of range"),
    ("[serve]\nrequest_timeout = \"1h\"\n", "serve.request_timeout: '1h' is out of range"),
    ("[notify]\nstderr = \"yes\"\n", "notify.stderr must be true or false, not 'yes'"),
    ("[check]\ngpu_count = -1\n", "gpu_count must be a non-negative integer"),
    ("[monitor]\ninterval = [1]\n", "monitor.interval: [1] is not a duration"),
])
def test_unknown_keys_and_bad_values_exit_3_naming_the_key(tmp_path, text, message):
    path = str(_write(tmp_path / "bad.toml", text))
    for command in (["config", "show"], ["check", "--from", BUNDLE], ["monitor", "--source", f"replay:{TRACE}"],
                    ["serve", "--source", f"replay:{TRACE}"]):
        result = CliRunner().invoke(main, [*command, "--config", path])
        assert result.exit_code == 3, (command, result.output)
        (line,) = result.stderr.splitlines()
        assert path in line and message in line, (command, line)


def test_a_bad_system_file_is_named_too(tmp_path):
    _write(config_module.SYSTEM_PATH, "[monitor]\nheld_mib = -5\n")
    result = CliRunner().invoke(main, ["config", "show"])
    assert result.exit_code == 3 and f"{config_module.SYSTEM_PATH}: monitor.held_mib" in result.stderr


def test_the_user_path_follows_xdg(monkeypatch, tmp_path):
    assert config_module.user_path({"XDG_CONFIG_HOME": "/srv/conf"}) == Path("/srv/conf/gpuhealth/config.toml")
    assert config_module.user_path({"XDG_CONFIG_HOME": "relative"}) == Path.home() / ".config/gpuhealth/config.toml"
    assert config_module.user_path({}) == Path.home() / ".config/gpuhealth/config.toml"
