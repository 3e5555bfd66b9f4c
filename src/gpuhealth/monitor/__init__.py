"""The monitor layer: samples GPUs continuously, keeps history, evaluates alert rules, notifies.

Built on the core (host seam, snapshots, checks); the core never imports this package. Modules here
import each other relatively because the import-direction test forbids ``gpuhealth.monitor`` imports
anywhere under ``src/`` (it guards the core, and cannot tell this package apart).
"""
