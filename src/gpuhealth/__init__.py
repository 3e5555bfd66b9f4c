"""gpuhealth: is this Linux GPU server fit for deep learning, and if not, what fixes it."""

__version__ = "0.1.0"

# The collector's first threshold while a short command runs (gpuhealth.cli explains why); the program's entry
# point (gpuhealth.__main__.run) sets it before anything else is imported.
START_UP_GC_THRESHOLD = 100_000
