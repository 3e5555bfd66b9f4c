"""The web layer: `gpuhealth serve` (Prometheus /metrics, a JSON API, live events and a dashboard).

It sits on top of the monitor and the core; nothing below imports it. See docs/serve.md.
"""
