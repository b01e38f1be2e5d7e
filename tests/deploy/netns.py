"""Hosts made of Linux network namespaces on one machine, for the multi-host test (needs root).

Every host is a network namespace with one veth pair to a bridge in the root namespace, on a
private /24 of 10.251.0.0/16 that exists only inside this machine: no default route, no NAT, so
nothing a host sends leaves the machine. Every process runs through ``ip netns exec`` and then
``unshare --mount``, which bind-mounts one shared folder at a mount point that is empty outside
(the processes share that folder and nothing else they write; the mount dies with the process).

Namespaces are named ``polis-<pid>-<prefix>-<host>`` after the test process that made them, so a
lab whose test process was killed (SIGKILL leaves no finalizer) is removed by the next lab
(:func:`sweep_stale`).

    with NetnsLab(root) as lab:
        sched = lab.add_host("sch")
        lab.spawn(sched, ["dask", "scheduler", "--host", sched.address], "scheduler")
        lab.remove_host(sched)           # kill its processes, delete its veth and namespace
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Host", "NetnsLab", "sweep_stale", "why_no_netns"]

#: The private range the hosts live in (one /24 per lab).
_RANGE = "10.251"
_NETNS = re.compile(r"^polis-(\d+)-(pn[0-9a-f]{4})-\w+$")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=20)


def why_no_netns() -> str | None:
    """Why this process cannot build namespaces (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"polis-probe-{secrets.token_hex(3)}"
    made = _ip("netns", "add", name, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        ran = subprocess.run(["ip", "netns", "exec", name, "unshare", "--mount", "true"], capture_output=True,
                             text=True, timeout=20)
        if ran.returncode != 0:
            return f"ip netns exec ... unshare --mount failed: {ran.stderr.strip()}"
    finally:
        _ip("netns", "del", name, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def sweep_stale() -> list[str]:
    """Remove the namespaces (their processes killed), veths and bridges of labs whose test process is gone.

    Returns:
        The namespaces removed.
    """
    removed = []
    for name in _ip("netns", "list").stdout.split():
        match = _NETNS.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        for pid in _ip("netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass  # exited meanwhile
        _ip("netns", "del", name, check=False)  # its veth ends go with it, and so do their peers
        _ip("link", "del", f"{match.group(2)}br", check=False)
        removed.append(name)
    return removed


@dataclass
class Host:
    """One namespace: its name, its address on the bridge, its veth and the processes started in it."""

    name: str
    netns: str
    address: str
    veth: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone already
    process.wait(timeout=10)


class NetnsLab:
    """A bridge and the namespaces on it, all named with one random prefix; ``close()`` removes all of it.

    Args:
        root: where logs go; ``root/shared`` is the folder every process sees at ``mount_point``.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.prefix = f"pn{secrets.token_hex(2)}"  # interface names have 15 characters at most
        self.shared = self.root / "shared"  #: the folder bind-mounted into every host
        self.mount_point = self.root / "mnt"  #: where the hosts see it (empty in the root namespace)
        self.shared.mkdir(parents=True, exist_ok=True)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        self.subnet = self._free_subnet()
        self.bridge = f"{self.prefix}br"
        self.gateway = f"{_RANGE}.{self.subnet}.1"  #: the root namespace's address on the bridge
        self.hosts: dict[str, Host] = {}

    @staticmethod
    def _free_subnet() -> int:
        used = _ip("-4", "-o", "addr").stdout
        for subnet in range(10 + secrets.randbelow(200), 255):
            if f" {_RANGE}.{subnet}." not in used:
                return subnet
        raise RuntimeError(f"no free /24 in {_RANGE}.0.0/16")

    def __enter__(self) -> NetnsLab:
        sweep_stale()
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_host(self, name: str) -> Host:
        """A new namespace ``<prefix>-<name>`` at the next address on the bridge."""
        host = Host(name, f"polis-{os.getpid()}-{self.prefix}-{name}", f"{_RANGE}.{self.subnet}.{10 + len(self.hosts)}",
                    f"{self.prefix}{name}")
        self.hosts[name] = host
        _ip("netns", "add", host.netns)
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", f"{host.veth}p", "netns", host.netns)
        _ip("link", "set", host.veth, "master", self.bridge)
        _ip("link", "set", host.veth, "up")
        inside = ["-n", host.netns]
        _ip(*inside, "link", "set", f"{host.veth}p", "name", "eth0")
        _ip(*inside, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip(*inside, "link", "set", "eth0", "up")
        _ip(*inside, "link", "set", "lo", "up")
        return host

    def spawn(self, host: Host, argv: list[str], log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` in ``host`` (its own session, the shared folder mounted); its output goes to ``root/<log_name>.log``."""
        mount = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
        command = ["ip", "netns", "exec", host.netns, "unshare", "--mount", "--propagation", "private",
                   "sh", "-c", mount, "sh", str(self.shared), str(self.mount_point), *argv]
        with open(self.root / f"{log_name}.log", "wb") as out:
            process = subprocess.Popen(command, cwd=self.root, env={**os.environ, **(env or {})},
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        host.processes.append(process)
        return process

    def log(self, log_name: str, chars: int = 3000) -> str:
        path = self.root / f"{log_name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def remove_host(self, host: Host) -> None:
        """Kill the host's processes (their sockets close first), then delete its veth and namespace."""
        for process in host.processes:
            _kill_group(process)
        host.processes.clear()
        _ip("link", "del", host.veth, check=False)  # deletes its peer inside the namespace too
        _ip("netns", "del", host.netns, check=False)
        self.hosts.pop(host.name, None)

    def leftovers(self) -> list[str]:
        """Namespaces and links of this lab that still exist (empty after ``close()``)."""
        names = _ip("netns", "list").stdout.split() + _ip("-o", "link").stdout.replace("@", " ").split()
        return sorted({n.rstrip(":") for n in names if self.prefix in n})

    def close(self) -> None:
        """Remove every host, then the bridge. Idempotent."""
        for host in list(self.hosts.values()):
            self.remove_host(host)
        _ip("link", "del", self.bridge, check=False)
