"""Written by gpuhealth.knowledge.write_tables(): escalation.csv pre-parsed (see knowledge.table_rows).
Do not edit: `make tables` rewrites it; tests/test_knowledge.py checks that it is current."""
# ruff: noqa
# fmt: off

TEXT = 'key,boots,why,source\ndefault,2,"a fault whose action is a reboot or a GPU reset, seen again after this many earlier boots of the host, is not cleared by that action: GPUd escalates such an Xid to hardware inspection after 2 reboots (DefaultRebootThreshold)","GPUd (leptonai/gpud), components/accelerator/nvidia/xid <https://github.com/leptonai/gpud/tree/main/components/accelerator/nvidia/xid>"\n'

HEADER = ('key', 'boots', 'why', 'source')

ROWS = (
    ('default', '2', 'a fault whose action is a reboot or a GPU reset, seen again after this many earlier boots of the host, is not cleared by that action: GPUd escalates such an Xid to hardware inspection after 2 reboots (DefaultRebootThreshold)', 'GPUd (leptonai/gpud), components/accelerator/nvidia/xid <https://github.com/leptonai/gpud/tree/main/components/accelerator/nvidia/xid>'),
)
