"""Issue 25 items 14-16: config values out of bounds, and webhooks that redirect or hold secrets.

Each attack as the issue found it: `interval = 0`, `nan`, `1e-9`, `inf` and `webhook_retries = -1` in a
monitor config; a webhook that answers 302 to another local server; a webhook URL whose path and query
are its secret, printed to the journal when delivery failed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources

import pytest
from click.testing import CliRunner
from monitor_fakes import T0

from gpuhealth.cli import main
from gpuhealth.monitor import config as config_module
from gpuhealth.monitor.config import DURATIONS, NUMBERS, check_duration, load_config
from gpuhealth.monitor.notify import WebhookNotifier, redact_url
from gpuhealth.monitor.rules import Alert

ALERT = Alert("temperature", 0, "warning", "firing", "GPU 0 at 88 °C", T0)

# --------------------------------------------------------------------------- config bounds


def _leaves(table: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    for name, value in table.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def test_every_duration_and_number_of_the_defaults_has_bounds_that_hold_its_default():
    """A new duration or count in defaults.toml without bounds fails here; so does a default outside them."""
    text = resources.files(config_module.__package__).joinpath("defaults.toml").read_text(encoding="utf-8")
    unbounded = []
    for key, value in _leaves(config_module._toml(text, "defaults.toml")):
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        is_duration = isinstance(value, str) and config_module._DURATION.fullmatch(value) is not None
        if (is_number or is_duration) and config_module._bound(DURATIONS, key) is None \
                and config_module._bound(NUMBERS, key) is None:
            unbounded.append(key)
    assert unbounded == []
    config_module.validate(config_module.defaults(), "defaults.toml")  # every default within its bounds


@pytest.mark.parametrize("line, says", [
    ("[monitor]\ninterval = 0", "monitor.interval: 0 is out of range: between 50ms and 1h"),
    ("[monitor]\ninterval = nan", "monitor.interval: nan is not a duration"),
    ("[monitor]\ninterval = inf", "monitor.interval: inf is not a duration"),
    ("[monitor]\ninterval = 1e-9", "monitor.interval: 1e-09 is out of range"),
    ('[monitor]\ninterval = "1e-9s"', "monitor.interval: '1e-9s' is not a duration"),
    ('[monitor]\ninterval = "0.001s"', "monitor.interval: '0.001s' is out of range"),
    ('[monitor]\ninterval = "2d"', "monitor.interval: '2d' is out of range"),
    ('[monitor]\ncheck_every = "1s"', "monitor.check_every: '1s' is out of range: between 10s and 30d (or 0: off)"),
    ("[notify]\nwebhook_retries = -1", "notify.webhook_retries: -1 is out of range: a whole number from 0 to 10"),
    ("[notify]\nwebhook_retries = 1000000", "notify.webhook_retries: 1000000 is out of range"),
    ("[notify]\nwebhook_retries = 2.5", "notify.webhook_retries: 2.5 is not a whole number"),
    ('[notify]\nwebhook_timeout = "0s"', "notify.webhook_timeout: '0s' is out of range"),
    ('[rules.temperature]\nfor = "1000d"', "rules.temperature.for: '1000d' is out of range"),
    ("[rules.temperature]\nthreshold_c = nan", "rules.temperature.threshold_c: nan is out of range"),
    ("[rules.gpu_count]\nexpected = -3", "rules.gpu_count.expected: -3 is out of range"),
    ('[rules.clock_slowdown]\nwindow = "0s"', "rules.clock_slowdown.window: '0s' is out of range"),
])
def test_a_value_out_of_bounds_is_one_line_naming_the_key_and_exit_3(tmp_path, line, says):
    path = tmp_path / "monitor.toml"
    path.write_text(line + "\n")
    with pytest.raises(ValueError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: {says}" or str(caught.value).startswith(f"{path}: {says}")
    result = CliRunner().invoke(main, ["monitor", "--config", str(path), "--source", "replay:/nonexistent",
                                       "--db", str(tmp_path / "h.db")])
    assert result.exit_code == 3, result.output
    assert says in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("option, value", [("--interval", "0"), ("--interval", "0.000000001s"),
                                           ("--interval", "2h"), ("--check-every", "1s")])
def test_interval_options_are_bounded_too(tmp_path, option, value):
    result = CliRunner().invoke(main, ["monitor", option, value, "--source", "replay:/nonexistent", "--db",
                                       str(tmp_path / "h.db")])
    assert result.exit_code == 3 and "out of range" in result.output, result.output
    if option == "--interval":
        result = CliRunner().invoke(main, ["watch", option, value, "--source", "replay:/nonexistent"])
        assert result.exit_code == 3 and "out of range" in result.output, result.output


def test_check_every_0_still_switches_the_check_off():
    assert check_duration("monitor.check_every", 0) == 0.0
    assert check_duration("monitor.check_every", "10m") == 600.0


# --------------------------------------------------------------------------- webhooks


@contextmanager
def http_server(status: int, location: str | None = None) -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on loopback answering every POST with ``status`` (and ``Location``); yields its base
    URL and the paths it was asked for."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hits.append(self.path)
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST  # noqa: N815 - a followed 302 turns the POST into a GET

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}", hits
    finally:
        httpd.shutdown()
        httpd.server_close()


SECRET_PATH = "/services/T0001/B0002/XyzSecretPathPart"
SECRET_TOKEN = "tok3n-SECRET-value"


def test_a_redirect_to_a_loopback_url_is_not_followed_and_the_log_line_holds_no_secret():
    with http_server(200) as (inner, inner_hits), \
            http_server(302, f"{inner}/internal/admin") as (outer, outer_hits):
        url = f"{outer}{SECRET_PATH}?token={SECRET_TOKEN}"
        errors: list[str] = []
        hook = WebhookNotifier(url, timeout=2, retries=1, sleep=lambda s: None, on_error=errors.append)
        hook.send(ALERT)
        hook.close()
    assert len(outer_hits) == 2  # asked twice (one retry), each answered 302
    assert inner_hits == []  # the redirect's target was never asked
    assert hook.delivered == 0 and len(errors) == 1
    line = errors[0]
    assert f"webhook {outer}/…: alert not delivered after 2 attempt(s): HTTP 302 redirect, not followed" == line
    assert "XyzSecretPathPart" not in line and SECRET_TOKEN not in line and "/internal" not in line


def test_a_refused_connection_is_logged_without_the_secret(tmp_path):
    with http_server(200) as (base, _):
        pass  # the server is gone: its port refuses
    errors: list[str] = []
    hook = WebhookNotifier(f"{base}{SECRET_PATH}?token={SECRET_TOKEN}", timeout=1, retries=0,
                           on_error=errors.append)
    hook.send(ALERT)
    hook.close()
    assert len(errors) == 1 and errors[0].startswith(f"webhook {base}/…: alert not delivered after 1 attempt(s)")
    assert "XyzSecretPathPart" not in errors[0] and SECRET_TOKEN not in errors[0]


def test_a_delivered_webhook_still_works():
    with http_server(200) as (base, hits):
        hook = WebhookNotifier(f"{base}/hook", timeout=2)
        hook.send(ALERT)
        hook.close()
    assert hits == ["/hook"] and hook.delivered == 1


@pytest.mark.parametrize("url, shown", [
    ("https://user:pa55@hooks.example.com:8443/a/b?token=x#f", "https://hooks.example.com:8443/…"),
    ("https://hooks.example.com", "https://hooks.example.com"),
    ("https://hooks.example.com/", "https://hooks.example.com"),
    ("http://[::1]:9000/x", "http://[::1]:9000/…"),
    ("http://[bad", "<webhook URL>"),
    ("not a url", "<webhook URL>"),
])
def test_redact_url_keeps_scheme_and_host_only(url, shown):
    assert redact_url(url) == shown


@pytest.mark.parametrize("kwargs, says", [
    ({"retries": -1}, "webhook_retries -1 is out of range"),
    ({"retries": 11}, "webhook_retries 11 is out of range"),
    ({"retries": True}, "webhook_retries True is out of range"),
    ({"timeout": 0}, "webhook_timeout 0 is out of range"),
    ({"timeout": float("nan")}, "webhook_timeout nan is out of range"),
    ({"timeout": float("inf")}, "webhook_timeout inf is out of range"),
    ({"backoff": -1}, "back-off -1 is out of range"),
])
def test_webhook_retries_and_timeouts_are_checked(kwargs, says):
    with pytest.raises(ValueError, match=says):
        WebhookNotifier("https://hooks.example.com/x", **kwargs)


def test_a_bad_webhook_url_is_refused_without_printing_it():
    with pytest.raises(ValueError) as caught:
        WebhookNotifier(f"ftp://hooks.example.com{SECRET_PATH}")
    assert "XyzSecretPathPart" not in str(caught.value)


def test_the_back_off_is_capped_and_the_thread_survives_a_bug():
    waits: list[float] = []
    errors: list[str] = []
    with http_server(500) as (base, hits):
        hook = WebhookNotifier(f"{base}/x", timeout=2, retries=10, backoff=1, sleep=waits.append,
                               on_error=errors.append)
        hook.send(ALERT)
        hook.close(timeout=30)
    assert len(hits) == 11 and waits == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
    # a delivery that raises something unexpected is reported, and the next alert still goes out
    with http_server(200) as (base, hits):
        hook = WebhookNotifier(f"{base}/x", timeout=2, on_error=errors.append)
        real = hook._deliver
        calls = iter([RuntimeError("boom"), None])

        def flaky(alert):
            problem = next(calls)
            if problem is not None:
                raise problem
            real(alert)

        hook._deliver = flaky  # type: ignore[method-assign]
        hook.send(ALERT)
        hook.send(ALERT)
        hook.close()
    assert hits == ["/x"] and errors[-1] == f"webhook {base}/…: delivery failed: boom"


def test_monitor_config_with_negative_retries_exits_3_before_starting(tmp_path):
    """The issue's attack end to end: webhook_retries = -1 killed the webhook thread with a traceback."""
    path = tmp_path / "monitor.toml"
    path.write_text('[notify]\nwebhook_url = "http://127.0.0.1:9/x"\nwebhook_retries = -1\n')
    result = CliRunner().invoke(main, ["monitor", "--config", str(path), "--source", "replay:/nonexistent"])
    assert result.exit_code == 3 and "notify.webhook_retries" in result.output
    assert json.dumps(result.output).count("\\n") <= 1
