"""Write ``src/gpuhealth/knowledge/legacy_gpus.csv``: every NVIDIA GPU (PCI device ID) whose last driver branch is a
legacy branch, from the ``supported-gpus/supported-gpus.json`` that NVIDIA ships in its Linux driver package.

That file is the machine-readable form of the driver README's "Appendix A. Supported NVIDIA GPU Products"
(``supportedchips.html``): one entry per device ID (and per subsystem ID where a board differs), with
``legacybranch`` set ("71.86.xx", "96.43.xx", "173.14.xx", "304.xx", "340.xx", "367.xx", "390.xx", "470.xx" and,
from the 590 package on, "580.xx") for the GPUs the driver no longer supports. Only the device-ID entries with a
legacy branch are kept (subsystem entries never name another branch than their device ID's: the miner checks);
the GPUs without one are supported by that package's branch and need no row.

Usage (``make mine-legacy SUPPORTED_GPUS=PATH``)::

    python tools/mine/mine_legacy_gpus.py --json PATH/supported-gpus.json --source "SGJ525 (legacybranch); LEGACYGPU"

``--out -`` writes the table to standard output instead of over the committed one. tests/test_legacy_branches.py
regenerates the table so and compares it with the committed one where the JSON is present
(``tools/mine/checkouts/supported-gpus.json``, or the path in ``GPUHEALTH_SUPPORTED_GPUS``); elsewhere (CI has no
network, and the tests never read outside the repository) it is skipped, and says so.

``--source`` is the source column, in the document keys of ``knowledge/sources.py`` (add a key for another package).

Extract the JSON from a driver package: ``sh NVIDIA-Linux-x86_64-<version>.run -x`` and take
``NVIDIA-Linux-x86_64-<version>/supported-gpus/supported-gpus.json``. The committed table was made from the 525
package's file (the copy at alex-tu-cc/get-nvidia-supported-gpus-json, gh-pages branch, commit b9c1aa1,
``focal-nvidia-driver-525-supported-gpus.json``, extracted from Ubuntu's nvidia-graphics-drivers-525 source package);
rows already in the table from another source are kept when the JSON does not name their device ID. The 580.xx
branch (Maxwell, Pascal, Volta) is not in the 525 file; ``knowledge/legacy.py`` gives it by architecture, as
NVIDIA's deprecation schedule states it.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "src/gpuhealth/knowledge/legacy_gpus.csv"
HEADER = ("device_id", "name", "last_branch", "source")


def legacy_rows(chips: list[dict], source: str) -> list[tuple[str, str, str, str]]:
    """(device ID, NVIDIA's product name, legacy branch, source) for every device ID with a legacy branch."""
    branches: dict[str, set[str]] = {}
    rows: dict[str, tuple[str, str, str, str]] = {}
    for chip in chips:
        device = chip["devid"].lower().removeprefix("0x")
        branches.setdefault(device, set()).add(chip.get("legacybranch") or "current")
        if "subdevid" in chip or not chip.get("legacybranch") or device in rows:
            continue
        rows[device] = (device, chip["name"], chip["legacybranch"], source)
    mixed = sorted(d for d, found in branches.items() if len(found) > 1)
    if mixed:  # a board whose branch differs from its device ID's: the table would need a subsystem column
        raise SystemExit(f"device IDs with more than one branch (subsystem entries): {', '.join(mixed)}")
    return sorted(rows.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, type=Path, help="supported-gpus.json of a driver package")
    parser.add_argument("--source", required=True, help="the source column: the document's title and address")
    parser.add_argument("--out", default=str(TABLE), help="where to write the table ('-': standard output)")
    args = parser.parse_args(argv)
    mined = legacy_rows(json.loads(args.json.read_text(encoding="utf-8"))["chips"], args.source)
    named = {row[0] for row in mined}
    kept = []
    if TABLE.exists():
        with TABLE.open(encoding="utf-8", newline="") as handle:
            kept = [tuple(r[h] for h in HEADER) for r in csv.DictReader(handle) if r["device_id"] not in named]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(sorted([*mined, *kept]))
    if args.out == "-":
        sys.stdout.write(text.getvalue())
    else:
        Path(args.out).write_text(text.getvalue(), encoding="utf-8", newline="")
    counts: dict[str, int] = {}
    for row in mined:
        counts[row[2]] = counts.get(row[2], 0) + 1
    where = "standard output" if args.out == "-" else args.out
    print(f"{where}: {len(mined)} device IDs mined, {len(kept)} kept from other sources;",
          ", ".join(f"{branch} {n}" for branch, n in sorted(counts.items(), key=lambda kv: float(kv[0][:-3]))),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
