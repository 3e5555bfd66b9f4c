"""The dashboard's chart rule (static/series.js) under Node, without a browser: a history answer is merged
into the chart, never replacing a sample streamed after the server answered. Without Node: skipped
(Chromium runs the same cases in test_web_browser.py, and CI has Chromium)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from series_cases import MERGE_CASES
from web_fakes import REPO

SERIES_JS = REPO / "src" / "gpuhealth" / "web" / "static" / "series.js"


def run_node(script: str) -> object:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed: the merge rule runs in Chromium only (test_web_browser.py)")
    done = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout)


@pytest.mark.parametrize("args,expected", [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES])
def test_merge_history_keeps_streamed_points_once_and_in_order(args, expected):
    script = (f"const s = require({json.dumps(str(SERIES_JS))});"
              f"const r = s.mergeHistory(...{json.dumps(args)});"
              "process.stdout.write(JSON.stringify([r.t, r.v]));")
    assert run_node(script) == [list(expected[0]), list(expected[1])]


def test_the_page_loads_the_rule_before_the_app():
    page = (SERIES_JS.parent / "index.html").read_text()
    assert page.index('src="/static/series.js"') < page.index('src="/static/app.js"')
    app = (SERIES_JS.parent / "app.js").read_text()
    assert "gpuhealthSeries.mergeHistory(" in app
