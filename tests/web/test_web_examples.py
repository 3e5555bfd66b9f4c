"""The README's one-line `serve` demo: the shipped generated trace and example bundle, served for real."""

from __future__ import annotations

import re

import httpx2
from web_fakes import REPO, serve_process, wait_for

from gpuhealth.monitor.config import load_config

TRACE = REPO / "examples" / "h100x8.trace"
BUNDLE = REPO / "examples" / "h100x8-xid-ecc.tar.gz"


def _gpus(base: str) -> list[dict]:
    return httpx2.get(f"{base}/api/v1/gpus", timeout=10).json()["gpus"]


def test_serve_replays_the_shipped_trace_and_checks_the_shipped_bundle(tmp_path):
    with serve_process(tmp_path, "--source", f"replay:{TRACE}", "--check-from", str(BUNDLE)) as base:
        wait_for(lambda: len(_gpus(base)) == 8, 30, "8 GPUs from the replay")
        gpus = _gpus(base)
        assert {g["state"] for g in gpus} == {"ok"}
        # the model from the samples, before any check; one training process per GPU
        assert {g["model"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
        assert [[p["pid"] for p in g["processes"]] for g in gpus] == [[31_400 + i] for i in range(8)]
        assert [g["pci_bus_id"] for g in gpus] == ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
                                                   "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0"]
        check = httpx2.post(f"{base}/api/v1/check", timeout=60).json()
        assert check["verdict"] == "BROKEN"
        assert any(f["code"] == "GH301" and f["message"].startswith("Xid 48 ") for f in check["findings"])
    # one start line: what is sampled, where history and alerts go, how many rules watch
    (started,) = [line for line in (tmp_path / "serve.log").read_text().splitlines() if "listening on" in line]
    rules = len(load_config()["rules"])
    assert re.fullmatch(rf"gpuhealth serve: listening on http://127\.0\.0\.1:\d+/ \(source replay of "
                        rf"{re.escape(str(TRACE))}, history {re.escape(str(tmp_path / 'history.db'))}, "
                        rf"{rules} rules, alerts to "
                        r"(stderr|the journal), the dashboard and /metrics; token not required: loopback only\)",
                        started), started
