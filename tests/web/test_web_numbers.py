"""serve over hostile numbers (issue 25, items 9 and 11): a replayed trace with NaN, infinite and 1e300
readings and NaN, infinite and 1e18 timestamps, over a history database in which an older gpuhealth stored
NaN and Infinity. Before: /api/v1/gpus and /api/v1/history answered 500 and /metrics exported +Inf."""

from __future__ import annotations

import http.client
import json
import math
import sqlite3
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from web_fakes import serve_process

from gpuhealth.monitor.sample import Sample
from gpuhealth.monitor.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "monitor"))
from test_monitor_numbers import bad_trace  # noqa: E402


def get(base: str, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection(urlsplit(base).netloc, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_api_and_metrics_answer_and_carry_no_nan_or_inf(tmp_path):
    now = time.time()
    store = Store(tmp_path / "history.db")  # the database serve_process points serve at
    store.write([Sample(now - 1800 + i, 0, temperature_c=60, power_w=250) for i in range(5)])
    store.close()
    with sqlite3.connect(tmp_path / "history.db") as conn:  # what an older gpuhealth left in it
        conn.executemany("INSERT INTO recent VALUES (?, ?, ?)", [
            (now - 1795, 0, '{"temperature_c":NaN,"power_w":Infinity}'), (math.inf, 0, '{"power_w":1}'),
            (-math.inf, 1, '{"power_w":1}')])
    trace = bad_trace(tmp_path / "bad.jsonl")
    with serve_process(tmp_path, "--source", f"replay:{trace}", "--replay-speed", "0") as base:
        deadline = time.monotonic() + 30
        while json.loads(get(base, "/api/v1/status")[1])["monitor"]["note"] != "replay finished":
            assert time.monotonic() < deadline, "the replay did not finish"
            time.sleep(0.2)
        status, body = get(base, "/api/v1/gpus")
        assert status == 200, body
        assert [g["gpu"] for g in json.loads(body)["gpus"]] == [0, 1]
        status, body = get(base, "/api/v1/history?range=1h&metric=temperature,power")
        assert status == 200, body
        series = json.loads(body)["series"]
        values = [v for s in series for v in s["v"]]
        assert values and all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)
        assert 250 in values  # the old database's good rows are read
        status, body = get(base, "/metrics")
        assert status == 200
        ours = [line for line in body.splitlines() if line.startswith("gpuhealth_")]
        assert ours and not [line for line in ours if line.split()[-1].lower() in ("nan", "+inf", "-inf", "inf")]
