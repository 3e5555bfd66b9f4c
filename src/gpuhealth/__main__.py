"""``python -m gpuhealth``."""

from gpuhealth.cli import main

main()
