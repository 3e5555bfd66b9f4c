"""`make eval`: run every case in tests/cases/ through `gpuhealth analyze` and print the scores.

Prints the score per class, overall and on decidable cases, then each miss with what led instead.
With --floor, also prints a floor.toml body (today's hit counts) to raise the floor with.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from caseset import Scores, load_all, render, run_case  # noqa: E402


def floor_toml(scores: Scores) -> str:
    lines = [f"overall = {scores.overall_hits}", f"decidable = {scores.decidable_hits}", "", "[classes]"]
    lines += [f'"{cls}" = {scores.class_hits(cls)}' for cls in scores.per_class
              if cls != "not-a-fault" and scores.class_hits(cls)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    scores = Scores([run_case(case) for case in load_all()])
    sys.stdout.write(render(scores))
    if "--floor" in argv:
        sys.stdout.write("\n# floor.toml at today's scores\n" + floor_toml(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
