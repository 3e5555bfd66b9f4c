"""gpuhealth: is this Linux GPU server fit for deep learning, and if not, what fixes it."""

__version__ = "0.1.0"
