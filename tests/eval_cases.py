"""`make eval`: run every case in tests/cases/ through `gpuhealth analyze` and print the scores.

For each split (dev/, then sealed/), prints the score per class, overall and on decidable cases, the
controls, then each miss with what led instead; it ends with both headline scores side by side. The
sealed score is the one to quote: its cases were gathered before they were scored and no rule is
written for them (tests/cases/README.md). With --floor, also prints a floor.toml body (dev's hit counts)
to raise the floor with; ``--split dev`` or ``--split sealed`` runs one split only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from caseset import SPLITS, Scores, load_all, render, run_case  # noqa: E402


def floor_toml(scores: Scores) -> str:
    lines = [f"overall = {scores.overall_hits}", f"decidable = {scores.decidable_hits}", "", "[classes]"]
    lines += [f'"{cls}" = {scores.class_hits(cls)}' for cls in scores.per_class
              if cls != "not-a-fault" and scores.class_hits(cls)]
    return "\n".join(lines) + "\n"


def headline(split: str, scores: Scores) -> str:
    """One line: a split's overall, decidable and control scores."""
    faults = scores.faults
    decidable = [o for o in faults if o.case.decidable]
    controls = [o for o in scores.outcomes if o.case.control]
    return (f"{split:7} overall {scores.overall_hits}/{len(faults)} = {scores.overall:.1%}   "
            f"decidable {scores.decidable_hits}/{len(decidable)} = {scores.decidable:.1%}   "
            f"controls {sum(o.hit for o in controls)}/{len(controls)} raise nothing critical")


def main(argv: list[str]) -> int:
    splits = SPLITS
    if "--split" in argv:
        index = argv.index("--split") + 1
        if index >= len(argv) or argv[index] not in SPLITS:
            sys.stderr.write(f"eval_cases: --split takes one of {', '.join(SPLITS)}\n")
            return 3
        splits = (argv[index],)
    results = {split: Scores([run_case(case) for case in load_all(split)]) for split in splits}
    for split, scores in results.items():
        sys.stdout.write(render(scores, split) + "\n")
    sys.stdout.write("".join(headline(split, scores) + "\n" for split, scores in results.items()))
    if "--floor" in argv and "dev" in results:
        sys.stdout.write("\n# floor.toml at today's dev scores\n" + floor_toml(results["dev"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
