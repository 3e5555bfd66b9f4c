"""The hand-written alert traces of examples/alerts/ (synthetic, labelled so in their headers and README):
the shipped files are what make_alert_traces.py writes, and `gpuhealth monitor` replaying each raises exactly
the alerts the README lists, and nothing on the healthy one."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
from click.testing import CliRunner

from conftest import REPO
from gpuhealth.monitor.commands import monitor

ALERTS = REPO / "examples" / "alerts"


def _script():
    spec = importlib.util.spec_from_file_location("make_alert_traces", ALERTS / "make_alert_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def test_the_shipped_traces_are_what_the_script_writes_and_say_they_are_hand_written(tmp_path):
    SCRIPT.main([str(tmp_path)])
    names = sorted(p.name for p in tmp_path.glob("*.trace"))
    assert names == sorted(p.name for p in ALERTS.glob("*.trace")) == sorted(f"{n}.trace" for n in SCRIPT.EXPECTED)
    for name in names:
        assert (tmp_path / name).read_bytes() == (ALERTS / name).read_bytes(), f"rebuild {name}: run the script"
        header = json.loads((ALERTS / name).read_text().splitlines()[0])
        assert header["note"].startswith("HAND-WRITTEN") and header["generated_by"] == SCRIPT.GENERATED_BY
    readme = (ALERTS / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in names)


@pytest.mark.parametrize("name", sorted(SCRIPT.EXPECTED))
def test_monitor_raises_exactly_the_expected_alerts(name, tmp_path):
    log = tmp_path / "alerts.log"
    config = tmp_path / "m.toml"
    config.write_text(f'[notify]\nlog_file = "{log}"\nstderr = false\n')
    result = CliRunner().invoke(monitor, ["--source", f"replay:{ALERTS / f'{name}.trace'}", "--replay-speed", "0",
                                          "--interval", "0.05", "--db", str(tmp_path / "h.db"),
                                          "--config", str(config)])
    assert result.exit_code == 0, result.output
    lines = log.read_text().splitlines() if log.exists() else []
    fired = {(m[1], m[2], None if m[3] is None else int(m[3])) for line in lines
             if (m := re.search(r" FIRING (\w+) (\S+) (?:gpu=(\d+)|host):", line))}
    assert fired == SCRIPT.EXPECTED[name], lines
    for text in SCRIPT.FOLDED.get(name, []):  # a folded alert is said in its primary's line, never dropped
        assert any(text in line for line in lines), (text, lines)
