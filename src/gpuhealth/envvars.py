"""gpuhealth's environment variables that take one of a few values. An unknown value is an error that names
the variable and the values it takes (exit 3), never a silent default: ``GPUHEALTH_FAIL_ON=warnings`` (a
typo) used to mean ``critical``, and a Slurm node with warnings then stayed in service."""

from __future__ import annotations

import os
from collections.abc import Mapping

from gpuhealth.exits import CannotRun

# name -> the values it takes (compared without case and surrounding blanks); unset or empty is the default
CHOICES: dict[str, tuple[str, ...]] = {
    # what drains a node (nhc, npd formats): degraded too ("warning", its former name), or only the default
    # (unusable node or GPU; "critical", its former name)
    "GPUHEALTH_FAIL_ON": ("critical", "degraded", "warning"),
    "GPUHEALTH_DEBUG": ("0", "1", "false", "true", "no", "yes", "off", "on", "f", "t", "n", "y"),  # click's booleans
}


def choice(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's value, normalised; "" when unset or empty. CannotRun when it is none of its values."""
    value = (os.environ if environ is None else environ).get(name, "").strip().lower()
    if value and value not in CHOICES[name]:
        raise CannotRun(f"environment variable {name}={value!r} is not one of its values: "
                        f"{', '.join(CHOICES[name])} (or unset)")
    return value


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Every variable of CHOICES checked before a command runs, so a typo fails before any work."""
    for name in CHOICES:
        choice(name, environ)
