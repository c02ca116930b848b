"""Hosts of a test network on one machine: each a Linux network namespace with an address of its own, all on a
bridge that lives in a namespace of its own, and this process (pytest's namespace) on it as one more host.

Why the bridge has a namespace of its own: in the machine's namespace a firewall may drop forwarded traffic
(Docker sets the FORWARD policy to DROP, and with br_netfilter bridged frames go through it); a namespace this
network made holds no such rules. Needs root and iproute2 (``ip netns``). Everything made -- namespaces, veths,
the processes started in them -- goes on ``stop()``, also after a failure.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_theodolite.infra.process import ManagedProcess


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def can_make_namespaces() -> str | None:
    """None where namespaces can be made here, else why not."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"thprobe{random.randrange(10**6)}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"`ip netns add` failed: {getattr(exc, 'stderr', '') or exc}"
    _ip("netns", "del", probe)
    return None


@dataclass
class HostNetwork:
    """``hosts`` namespaces at ``address(0..hosts-1)``; this process is at ``local_address``."""

    hosts: int
    tag: str = field(default_factory=lambda: f"th{random.randrange(36**4):04x}")
    processes: list[ManagedProcess] = field(default_factory=list, init=False)
    removed: set[int] = field(default_factory=set, init=False)
    _base: str = field(default="", init=False)
    _empty: Path | None = field(default=None, init=False)

    @property
    def local_address(self) -> str:
        return f"{self._base}1"

    def address(self, host: int) -> str:
        return f"{self._base}{10 + host}"

    def namespace(self, host: int) -> str:
        return f"{self.tag}-h{host}"

    @property
    def _switch(self) -> str:
        return f"{self.tag}-sw"

    def start(self) -> HostNetwork:
        taken = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True, check=True).stdout
        while True:  # a /24 of 10.x.y.0/24 that no interface of this machine uses
            self._base = f"10.{random.randrange(200, 250)}.{random.randrange(0, 256)}."
            if self._base not in taken:
                break
        self._empty = Path(tempfile.mkdtemp(prefix="theodolite-netns-empty-"))
        try:
            _ip("netns", "add", self._switch)
            _ip("-n", self._switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self._switch, "link", "set", "br0", "up")
            local = f"{self.tag}-d"
            _ip("link", "add", local, "type", "veth", "peer", "name", "p-d", "netns", self._switch)
            _ip("addr", "add", f"{self.local_address}/24", "dev", local)
            _ip("link", "set", local, "up")
            self._attach("p-d")
            for host in range(self.hosts):
                name = self.namespace(host)
                _ip("netns", "add", name)
                _ip("-n", name, "link", "set", "lo", "up")
                _ip(
                    "link",
                    "add",
                    f"{self.tag}-v{host}",
                    "netns",
                    name,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    f"p-{host}",
                    "netns",
                    self._switch,
                )
                _ip("-n", name, "link", "set", f"{self.tag}-v{host}", "name", "eth0")
                _ip("-n", name, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
                _ip("-n", name, "link", "set", "eth0", "up")
                self._attach(f"p-{host}")
        except BaseException:
            self.stop()
            raise
        return self

    def _attach(self, port: str) -> None:
        _ip("-n", self._switch, "link", "set", port, "master", "br0")
        _ip("-n", self._switch, "link", "set", port, "up")

    def run(
        self,
        host: int,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str],
        hidden: Sequence[Path] = (),
    ) -> ManagedProcess:
        """Start `argv` on `host`; each of `hidden` (a directory) shows empty there: `ip netns exec` gives the
        process a mount namespace of its own, in which an empty directory is bound over each."""
        assert self._empty is not None
        binds = " && ".join(f"mount --bind {self._empty} '{path}'" for path in hidden)
        script = f'{binds + " && " if binds else ""}exec "$@"'
        process = ManagedProcess(
            ["ip", "netns", "exec", self.namespace(host), "sh", "-c", script, "sh", *argv],
            log_path,
            env=dict(env),
        ).start()
        self.processes.append(process)
        return process

    def remove_host(self, host: int) -> None:
        """The host gone at once, as a machine that loses power: its processes SIGKILLed, its namespace (and
        with it its link) deleted."""
        name = self.namespace(host)
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            subprocess.run(["kill", "-9", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self.removed.add(host)

    def silence_host(self, host: int) -> None:
        """The host's link dropped at the switch, as a cut cable or a hung network card: its processes run on,
        and nothing it sent or was sent arrives -- no reset, no refusal, only silence."""
        _ip("-n", self._switch, "link", "set", f"p-{host}", "down")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        for host in range(self.hosts):
            if host not in self.removed:
                self.remove_host(host)
        subprocess.run(["ip", "netns", "del", self._switch], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.tag}-d"], capture_output=True)
        if self._empty is not None:
            shutil.rmtree(self._empty, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """Namespaces and links of this network still there (none after stop())."""
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        return [line for line in (namespaces + links).splitlines() if self.tag in line]

    def __enter__(self) -> HostNetwork:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
