"""Written by gpuhealth.knowledge.write_tables(): command_ranges.csv pre-parsed (see knowledge.table_rows).
Do not edit: `make tables` rewrites it; tests/test_knowledge.py checks that it is current."""
# ruff: noqa
# fmt: off

TEXT = 'pattern,os_ids,min_version,max_version,what,source\n\\bubuntu-drivers\\b,ubuntu,,,"Ubuntu\'s ubuntu-drivers tool (package ubuntu-drivers-common, Ubuntu only)","Ubuntu Server documentation, ""NVIDIA drivers installation"" <https://documentation.ubuntu.com/server/how-to/graphics/install-nvidia-drivers/>"\n"\\bnvidia-(?:utils|driver|headless)-(?:<branch>|[0-9]{3})\\b",ubuntu,,,"Ubuntu\'s versioned driver packages (nvidia-utils-<branch>, nvidia-driver-<branch>[-server][-open]; Debian\'s are unversioned)","Ubuntu packages, nvidia-utils-565-server in noble <https://packages.ubuntu.com/noble/nvidia-utils-565-server>"\n\\bdnf\\s+module\\b,rhel;centos;rocky;almalinux;ol,8,9,"NVIDIA\'s dnf module streams (nvidia-driver:<branch>-open): RHEL 8/9 and rebuilds; RHEL 10 and Fedora have none","NVIDIA Driver Installation Guide, ""Kernel Modules"" <https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html>"\n\\bdnf\\s+module\\b,amzn,2023,2023,"NVIDIA\'s dnf module streams on Amazon Linux 2023","NVIDIA Driver Installation Guide, ""Kernel Modules"" <https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html>"\n'

HEADER = ('pattern', 'os_ids', 'min_version', 'max_version', 'what', 'source')

ROWS = (
    ('\\bubuntu-drivers\\b', 'ubuntu', '', '', "Ubuntu's ubuntu-drivers tool (package ubuntu-drivers-common, Ubuntu only)", 'Ubuntu Server documentation, "NVIDIA drivers installation" <https://documentation.ubuntu.com/server/how-to/graphics/install-nvidia-drivers/>'),
    ('\\bnvidia-(?:utils|driver|headless)-(?:<branch>|[0-9]{3})\\b', 'ubuntu', '', '', "Ubuntu's versioned driver packages (nvidia-utils-<branch>, nvidia-driver-<branch>[-server][-open]; Debian's are unversioned)", 'Ubuntu packages, nvidia-utils-565-server in noble <https://packages.ubuntu.com/noble/nvidia-utils-565-server>'),
    ('\\bdnf\\s+module\\b', 'rhel;centos;rocky;almalinux;ol', '8', '9', "NVIDIA's dnf module streams (nvidia-driver:<branch>-open): RHEL 8/9 and rebuilds; RHEL 10 and Fedora have none", 'NVIDIA Driver Installation Guide, "Kernel Modules" <https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html>'),
    ('\\bdnf\\s+module\\b', 'amzn', '2023', '2023', "NVIDIA's dnf module streams on Amazon Linux 2023", 'NVIDIA Driver Installation Guide, "Kernel Modules" <https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html>'),
)
