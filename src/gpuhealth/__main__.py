"""``python -m gpuhealth``, and the ``gpuhealth`` program's entry point (``run``)."""

from __future__ import annotations

import gc

from gpuhealth import START_UP_GC_THRESHOLD


def run() -> None:
    """Run the ``gpuhealth`` program. The collector's first threshold is raised before click and the package
    are imported (the imports allocate long-lived objects: modules, classes), and a command that printed its
    report may leave without the interpreter's tear-down (``cli.run_program``)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(START_UP_GC_THRESHOLD, *thresholds[1:])
    from gpuhealth.cli import run_program

    run_program(thresholds)


if __name__ == "__main__":
    run()
