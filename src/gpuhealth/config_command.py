"""``gpuhealth config show``: the merged configuration, and where each value came from."""

from __future__ import annotations

from pathlib import Path

import click

from gpuhealth.exits import CannotRun


@click.group()
def config() -> None:
    """gpuhealth's one configuration file (see docs/configuration.md)."""


@config.command()
@click.option("--config", "path", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="The file `check`, `monitor` and `serve` would be given with --config.")
def show(path: Path | None) -> None:
    """Print the merged configuration as TOML, each value with where it came from (default, system file,
    user file, --config). Unknown keys and bad values are errors that name the key."""
    from gpuhealth.config import load
    from gpuhealth.config import show as render
    from gpuhealth.inert import visible

    try:
        settings = load(path)
    except ValueError as exc:
        raise CannotRun(str(exc)) from exc
    click.echo(visible(render(settings)), nl=False)
