"""The ``recommend`` and ``fix`` commands. ``cli.py`` adds them to the ``gpuhealth`` group.

Like ``check``, both collect from this host (or replay a bundle with ``--from``); heavy modules are
imported inside the commands so importing this module costs only click.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from gpuhealth.model import Snapshot

EXIT_CANNOT_RUN = 3
TIMEOUT_S = 10.0


class CannotRun(click.ClickException):
    exit_code = EXIT_CANNOT_RUN


def _snapshot(source: Path | None) -> Snapshot:
    from gpuhealth.collect import collect

    if source is None:
        from gpuhealth.host import LocalHost

        return collect(LocalHost(), TIMEOUT_S)
    from gpuhealth.bundle import BundleError, BundleHost

    try:
        host = BundleHost(source)
    except BundleError as exc:
        raise CannotRun(str(exc)) from exc
    try:
        return collect(host, TIMEOUT_S, origin="bundle", captured_at=host.captured_at)
    finally:
        host.close()


from_option = click.option("--from", "source", type=click.Path(exists=True, path_type=Path),
                           help="Use a captured bundle (directory or .tar.gz) instead of this host.")


@click.command()
@from_option
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
def recommend(source: Path | None, output_format: str) -> None:
    """Recommend a driver branch, kernel-module flavour, install commands, CUDA and PyTorch wheel."""
    from gpuhealth.recommend import recommend as advise
    from gpuhealth.recommend import render_text, to_json

    result = advise(_snapshot(source))
    if output_format == "json":
        click.echo(to_json(result), nl=False)
        return
    from rich.console import Console

    render_text(result, Console(highlight=False))


@click.command()
@from_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the script to FILE (mode 0755) instead of printing it.")
def fix(source: Path | None, output: Path | None) -> None:
    """Write the current findings' fixes as one ordered bash script to review (it is never run)."""
    from gpuhealth.checks.engine import run_checks
    from gpuhealth.fixscript import fix_script

    script = fix_script(run_checks(_snapshot(source)))
    if output is None:
        click.echo(script, nl=False)
        return
    try:
        output.write_text(script, encoding="utf-8")
        os.chmod(output, 0o755)
    except OSError as exc:
        raise CannotRun(f"{output}: {exc.strerror or exc}") from exc
    click.echo(f"fix script written to {output}; review it, then run it yourself", err=True)
