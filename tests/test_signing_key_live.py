"""Live `check` asks `mokutil --test-key` about the module-signing certificate on disk, only under Secure Boot and
only for a key that is there, with the probes' deadline; the answer is recorded into a bundle like every command.
Hosts: tests/hosts/ubuntu-dkms-key-not-enrolled.json (its description says what is hand-written)."""

from __future__ import annotations

import copy
from pathlib import Path

from gpuhealth.bundle import BundleHost, RecordingHost
from gpuhealth.collect.install import SIGNING_KEYS, probe_install
from gpuhealth.model import CommandRun
from hostcases import FakeHost, load_spec

TEST_KEY = "mokutil --test-key /var/lib/dkms/mok.pub"


class Counting(FakeHost):
    """A FakeHost that notes every command and its deadline."""

    def __init__(self, spec: dict) -> None:
        super().__init__(spec)
        self.calls: list[tuple[str, float]] = []

    def run(self, argv: list[str], timeout: float = 10.0) -> CommandRun:
        self.calls.append((" ".join(argv), timeout))
        return super().run(argv, timeout)


def spec(**changes: object) -> dict:
    data = copy.deepcopy(load_spec("ubuntu-dkms-key-not-enrolled"))
    for name, value in changes.items():
        data[name] = value
    return data


def test_under_secure_boot_the_key_on_disk_is_tested_with_a_deadline():
    host = Counting(spec())
    install = probe_install(host, 7.5).fields["install"]
    assert (install.signing_key, install.signing_key_state) == ("/var/lib/dkms/mok.pub", "not-enrolled")
    assert install.signing_key_line == "/var/lib/dkms/mok.pub is not enrolled"
    assert [t for c, t in host.calls if c == TEST_KEY] == [7.5]


def test_without_secure_boot_no_key_is_tested():
    commands = dict(spec()["commands"])
    commands["mokutil --sb-state"] = {"stdout": "SecureBoot disabled\n"}
    host = Counting(spec(commands=commands))
    install = probe_install(host, 5).fields["install"]
    assert install.secure_boot == "disabled" and install.signing_key is None
    assert not any("--test-key" in c for c, _ in host.calls)


def test_without_a_key_on_disk_nothing_is_tested():
    stats = {k: v for k, v in spec()["stats"].items() if k not in SIGNING_KEYS}
    host = Counting(spec(stats=stats))
    install = probe_install(host, 5).fields["install"]
    assert install.secure_boot == "enabled" and install.signing_key is None
    assert not any("--test-key" in c for c, _ in host.calls)


def test_a_test_key_that_answers_nothing_is_unavailable_not_trusted():
    commands = dict(spec()["commands"])
    commands[TEST_KEY] = {"exit_code": 2, "stderr": "Failed to read /var/lib/dkms/mok.pub\n"}
    found = probe_install(FakeHost(spec(commands=commands)), 5)
    assert found.fields["install"].signing_key_state is None
    assert "mokutil --test-key /var/lib/dkms/mok.pub: exit 2" in found.unavailable["install_signing_key"]


def test_the_answer_is_recorded_into_a_bundle_and_replayed(tmp_path: Path):
    recorder = RecordingHost(FakeHost(spec()), tmp_path / "bundle")
    probe_install(recorder, 5)
    recorder.finish()
    replayed = probe_install(BundleHost(tmp_path / "bundle"), 5).fields["install"]
    assert (replayed.signing_key, replayed.signing_key_state) == ("/var/lib/dkms/mok.pub", "not-enrolled")
