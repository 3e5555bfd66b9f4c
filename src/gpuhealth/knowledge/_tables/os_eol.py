"""Written by gpuhealth.knowledge.write_tables(): os_eol.csv pre-parsed (see knowledge.table_rows).
Do not edit: `make tables` rewrites it; tests/test_knowledge.py checks that it is current."""
# ruff: noqa
# fmt: off

TEXT = 'id,version,end_of_support,support,source,confirmed\ncentos,7,2024-06-30,end of maintenance updates (CentOS Linux 7 end of life),https://www.redhat.com/en/topics/linux/centos-linux-eol,yes\ncentos,8,2021-12-31,end of life (CentOS Linux 8; CentOS Stream 8 ended 2024-05-31),https://www.redhat.com/en/topics/linux/centos-linux-eol,yes\nrhel,7,2024-06-30,end of Maintenance Support (Extended Life Cycle Support is sold separately),https://access.redhat.com/support/policy/updates/errata,yes\nrhel,8,2029-05-31,end of Maintenance Support,https://access.redhat.com/support/policy/updates/errata,yes\nrhel,9,2032-05-31,end of Maintenance Support,https://access.redhat.com/support/policy/updates/errata,yes\nrocky,8,2029-05-31,end of security support,https://wiki.rockylinux.org/rocky/version/,not confirmed\nrocky,9,2032-05-31,end of security support,https://wiki.rockylinux.org/rocky/version/,not confirmed\nalmalinux,8,2029-03-01,end of security support,https://wiki.almalinux.org/release-notes/,not confirmed\nalmalinux,9,2032-05-31,end of security support,https://wiki.almalinux.org/release-notes/,not confirmed\nubuntu,16.04,2021-04-30,end of standard support (ESM with Ubuntu Pro),https://ubuntu.com/about/release-cycle,yes\nubuntu,18.04,2023-05-31,end of standard support (ESM with Ubuntu Pro),https://ubuntu.com/about/release-cycle,yes\nubuntu,20.04,2025-05-31,end of standard support (ESM with Ubuntu Pro),https://ubuntu.com/about/release-cycle,yes\nubuntu,22.04,2027-04-30,end of standard support (ESM with Ubuntu Pro),https://ubuntu.com/about/release-cycle,not confirmed (the page gives the month; the day is assumed)\nubuntu,24.04,2029-04-30,end of standard support (ESM with Ubuntu Pro),https://ubuntu.com/about/release-cycle,not confirmed (the page gives the month; the day is assumed)\ndebian,9,2022-06-30,end of Debian LTS,https://wiki.debian.org/LTS,yes\ndebian,10,2024-06-30,end of Debian LTS,https://wiki.debian.org/LTS,yes\ndebian,11,2026-08-31,end of Debian LTS,https://wiki.debian.org/LTS,yes\ndebian,12,2028-06-30,end of Debian LTS,https://wiki.debian.org/LTS,not confirmed\n'

HEADER = ('id', 'version', 'end_of_support', 'support', 'source', 'confirmed')

ROWS = (
    ('centos', '7', '2024-06-30', 'end of maintenance updates (CentOS Linux 7 end of life)', 'https://www.redhat.com/en/topics/linux/centos-linux-eol', 'yes'),
    ('centos', '8', '2021-12-31', 'end of life (CentOS Linux 8; CentOS Stream 8 ended 2024-05-31)', 'https://www.redhat.com/en/topics/linux/centos-linux-eol', 'yes'),
    ('rhel', '7', '2024-06-30', 'end of Maintenance Support (Extended Life Cycle Support is sold separately)', 'https://access.redhat.com/support/policy/updates/errata', 'yes'),
    ('rhel', '8', '2029-05-31', 'end of Maintenance Support', 'https://access.redhat.com/support/policy/updates/errata', 'yes'),
    ('rhel', '9', '2032-05-31', 'end of Maintenance Support', 'https://access.redhat.com/support/policy/updates/errata', 'yes'),
    ('rocky', '8', '2029-05-31', 'end of security support', 'https://wiki.rockylinux.org/rocky/version/', 'not confirmed'),
    ('rocky', '9', '2032-05-31', 'end of security support', 'https://wiki.rockylinux.org/rocky/version/', 'not confirmed'),
    ('almalinux', '8', '2029-03-01', 'end of security support', 'https://wiki.almalinux.org/release-notes/', 'not confirmed'),
    ('almalinux', '9', '2032-05-31', 'end of security support', 'https://wiki.almalinux.org/release-notes/', 'not confirmed'),
    ('ubuntu', '16.04', '2021-04-30', 'end of standard support (ESM with Ubuntu Pro)', 'https://ubuntu.com/about/release-cycle', 'yes'),
    ('ubuntu', '18.04', '2023-05-31', 'end of standard support (ESM with Ubuntu Pro)', 'https://ubuntu.com/about/release-cycle', 'yes'),
    ('ubuntu', '20.04', '2025-05-31', 'end of standard support (ESM with Ubuntu Pro)', 'https://ubuntu.com/about/release-cycle', 'yes'),
    ('ubuntu', '22.04', '2027-04-30', 'end of standard support (ESM with Ubuntu Pro)', 'https://ubuntu.com/about/release-cycle', 'not confirmed (the page gives the month; the day is assumed)'),
    ('ubuntu', '24.04', '2029-04-30', 'end of standard support (ESM with Ubuntu Pro)', 'https://ubuntu.com/about/release-cycle', 'not confirmed (the page gives the month; the day is assumed)'),
    ('debian', '9', '2022-06-30', 'end of Debian LTS', 'https://wiki.debian.org/LTS', 'yes'),
    ('debian', '10', '2024-06-30', 'end of Debian LTS', 'https://wiki.debian.org/LTS', 'yes'),
    ('debian', '11', '2026-08-31', 'end of Debian LTS', 'https://wiki.debian.org/LTS', 'yes'),
    ('debian', '12', '2028-06-30', 'end of Debian LTS', 'https://wiki.debian.org/LTS', 'not confirmed'),
)
