"""parsers/hostside.py: /proc counters, `df -P -l -i`, InfiniBand rate and state text. The samples are
HAND-WRITTEN in the shape the kernel and GNU df print (values our own); only ParseError may escape."""

from __future__ import annotations

from fuzzing import fuzz_tests, only_parse_errors
from gpuhealth.parsers.hostside import (
    ib_rate_gbps,
    ib_state_name,
    parse_df_inodes,
    parse_file_nr,
    parse_int,
    parse_loadavg_tasks,
)

_TEXTS = [
    "2080\t0\t9223372036854775807\n",
    "0.52 0.58 0.59 3/3912 812345\n",
    "4194304\n",
    "Filesystem          Inodes    IUsed       IFree IUse% Mounted on\n"
    "/dev/nvme0n1p2   117178368  2931614   114246754    3% /\n"
    "/dev/nvme0n1p1           0        0           0     - /boot/efi\n",
    "400 Gb/sec (4X NDR)\n", "4: ACTIVE\n", "5: LinkUp\n",
]



def _rate_and_state(text: str) -> None:
    ib_rate_gbps(text)  # never raises: None for text in another form
    ib_state_name(text)


_PARSERS = (parse_file_nr, parse_loadavg_tasks, parse_df_inodes, lambda text: parse_int(text, "pid_max"),
            _rate_and_state)

test_fuzz_random_text, test_fuzz_mutated_inputs = fuzz_tests(only_parse_errors(*_PARSERS), _TEXTS)
