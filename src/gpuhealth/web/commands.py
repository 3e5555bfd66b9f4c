"""The ``serve`` click command. Only click is imported here; the web stack loads when the command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpuhealth.exits import CannotRun


@click.command()
@click.option("--listen", default="127.0.0.1:9835", show_default=True, metavar="HOST:PORT",
              help="Address to listen on. Anything but loopback needs a token.")
@click.option("--source", "source_spec", default="auto", show_default=True,
              help="nvml, smi (streaming nvidia-smi), replay:FILE, or auto (NVML, else nvidia-smi).")
@click.option("--db", type=click.Path(path_type=Path, dir_okay=False), help="History database (SQLite).")
@click.option("--token", envvar="GPUHEALTH_TOKEN", show_envvar=True,
              help="Bearer token clients must send (prefer the variable or --token-file: "
                   "a command line is visible to every user).")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Read the token from the first line of FILE.")
@click.option("--interval", help="Sampling interval (default 1s).")
@click.option("--check-every", help="Run the full check this often (default 10m; 0 disables).")
@click.option("--config", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="gpuhealth's config file (TOML), over /etc/gpuhealth/config.toml and ~/.config/gpuhealth/"
                   "config.toml; its [serve] section sets these flags' defaults (see docs/configuration.md).")
@click.option("--replay-speed", type=float, default=1.0, show_default=True,
              help="With replay:FILE: 1 is real time, 0 as fast as possible.")
@click.option("--check-from", type=click.Path(path_type=Path, exists=True),
              help="\"Check now\" checks this bundle instead of this host (demos, replays).")
@click.option("--check-rate", default="30s", show_default=True,
              help="At most one requested check per this period (POST /api/v1/check).")
@click.option("--request-timeout", type=click.FloatRange(0.5, 300), default=10.0, show_default=True,
              help="Seconds a client has to send a whole request (headers and body); slower ones are closed.")
@click.option("--write-timeout", type=click.FloatRange(1, 300), default=10.0, show_default=True,
              help="Seconds a client may leave our response unread (an event stream too) before it is cut off.")
def serve(listen: str, source_spec: str, db: Path | None, token: str | None, token_file: Path | None,
          interval: str | None, check_every: str | None, config: Path | None, replay_speed: float,
          check_from: Path | None, check_rate: str, request_timeout: float, write_timeout: float) -> None:
    """Monitor this host and serve /metrics, a JSON API and a live dashboard (foreground).

    One process: the monitor's sampling, history and alerts, plus a web server for Prometheus and
    people. Binds to 127.0.0.1 by default; any other address requires a token. See docs/serve.md.
    """
    from gpuhealth.monitor.commands import _settings
    from gpuhealth.monitor.config import check_duration, parse_duration

    from .server import ServeError
    from .server import serve as run

    settings = _settings(config)
    given = _from_config(settings, listen=listen, token_file=token_file, check_rate=check_rate,
                         request_timeout=request_timeout, write_timeout=write_timeout)
    listen, check_rate = given["listen"], given["check_rate"]
    token_file = Path(given["token_file"]) if given["token_file"] else None
    try:
        request_timeout = check_duration("serve.request_timeout", given["request_timeout"])
        write_timeout = check_duration("serve.write_timeout", given["write_timeout"])
    except ValueError as exc:  # only a flag can get here: the file's values were checked as it was read
        raise CannotRun(f"serve: {exc}") from exc
    if token_file is not None:
        try:
            lines = token_file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CannotRun(f"{token_file}: {exc.strerror or exc}") from exc
        token = lines[0] if lines else ""
    try:
        period = parse_duration(check_rate)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--check-rate") from exc
    try:
        run(listen, source_spec, db, token or None, interval, check_every, config, replay_speed, check_from, period,
            request_timeout=request_timeout, write_timeout=write_timeout, settings=settings)
    except ServeError as exc:
        raise CannotRun(str(exc)) from exc


def _from_config(settings: Any, **flags: Any) -> dict[str, Any]:
    """Each flag's value: given on the command line, it wins (noted as a flag in ``settings``); left at its
    default, the [serve] section's value (the defaults, or a config file's)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    out = {}
    for name, value in flags.items():
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            settings.set_flag(f"serve.{name}", str(value) if isinstance(value, Path) else value,
                              f"--{name.replace('_', '-')}")
            out[name] = value
        else:
            out[name] = settings["serve"][name]
    return out


if __name__ == "__main__":  # pragma: no cover
    serve()
