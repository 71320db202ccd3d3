#!/usr/bin/env python3
"""Free loopback TCP ports for tests that hand a port to another process.

A port picked by binding port 0 comes from the kernel's ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), the same range the kernel draws
source ports from for outgoing connections. Between the pick and the moment
the other process (nginx, a container, a server started with the port on its
command line) binds it, any connection on the machine may take it as its
source port, and the bind then fails with EADDRINUSE; CI saw exactly that.
So ports are drawn at random from below the ephemeral range, where the kernel
never assigns one by itself, and each is checked to be free when drawn.
tests/e2e/e2e_util.cc's PickFreePort follows the same rule.

As a script: `free_port.py [N]` prints N ports (default 1), one per line.
"""
import random
import socket
import sys
from typing import List

_LOWEST = 10000  # above the well-known and common registered service ports


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int = 1) -> List[int]:
    """n distinct free ports on 127.0.0.1, none in the ephemeral range."""
    high = _ephemeral_low()
    rng = random.SystemRandom()
    ports: List[int] = []
    for _ in range(1000):
        if len(ports) == n:
            break
        if high - _LOWEST < 1000:  # an unusual range: fall back to the kernel's pick
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        else:
            port = rng.randrange(_LOWEST, high)
        if port not in ports and _is_free(port):
            ports.append(port)
    if len(ports) < n:
        raise RuntimeError(f"no {n} free loopback ports found")
    return ports


def free_port() -> int:
    return free_ports(1)[0]


if __name__ == "__main__":
    print("\n".join(str(p) for p in free_ports(int(sys.argv[1]) if len(sys.argv) > 1 else 1)))
