"""``python -m gpuhealth.web [OPTIONS]``: the same as ``gpuhealth serve`` (used by the tests)."""

from gpuhealth.web.commands import serve

serve(prog_name="gpuhealth serve")
