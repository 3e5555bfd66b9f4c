"""Compile the bytecode an installed gpuhealth runs with, before a bench times start-up.

``pip install`` compiles every module it installs (the package and its dependencies), so an installed ``gpuhealth``
never compiles source at start-up. A development venv may hold none of that bytecode: one built with
``PYTHONDONTWRITEBYTECODE`` set, or copied without its ``__pycache__`` folders, compiles click's modules from source on
every run (about 40 ms at a load of 1 on this project's 2-core machine, a third of ``analyze``'s start-up), which
measures a cost no user pays. This compiles ``src/`` and the runtime dependencies' own modules (pyproject.toml's
``dependencies``) where their bytecode is missing or stale, as pip would have; up-to-date files are left alone.
"""

from __future__ import annotations

import compileall
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the import names of pyproject.toml's runtime dependencies (nvidia-ml-py is pynvml)
RUNTIME = ("click", "rich", "pynvml", "starlette", "uvicorn", "prometheus_client")


def compile_bytecode() -> None:
    """Compile ``src/`` and the installed runtime dependencies (quietly; a missing dependency is skipped)."""
    compileall.compile_dir(str(ROOT / "src"), quiet=1)
    for name in RUNTIME:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if spec.submodule_search_locations:  # a package: its folder
            compileall.compile_dir(str(origin.parent), quiet=1)
        else:
            compileall.compile_file(str(origin), quiet=1)
