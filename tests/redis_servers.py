"""Real redis-server processes on loopback ports, for the Redis store tests.

Nothing here is faked: each server is the redis-server binary on PATH,
started in a temporary directory, and stopped at the end of the session.
``.ci/run`` installs redis-server when the machine lacks it; elsewhere the
Redis tests skip with a note saying so.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def redis_available() -> bool:
    return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None


def free_port() -> int:
    """A loopback port that is free, and whose cluster-bus twin (port + 10000) is free too."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


class RedisServer:
    """One redis-server process; ``cluster=True`` starts it as a cluster node."""

    def __init__(
        self, directory: Path, *, cluster: bool = False, port: int | None = None, config: Sequence[str] = ()
    ) -> None:
        self.config = list(config)  # more redis-server options ("--name", "value", ...)
        self.port = port or free_port()
        self.directory = directory / str(self.port)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cluster = cluster
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        command = [
            "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--logfile", "redis.log",
        ]  # fmt: skip
        if self.cluster:
            command += [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "3000",
            ]
        command += self.config
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.cli("PING") != "PONG":
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start: {self.log()}")
            time.sleep(0.05)
        return self

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=30, check=False
        )
        return done.stdout.strip()

    def log(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


class RedisCluster:
    """Three cluster nodes on loopback, joined with ``redis-cli --cluster create``."""

    def __init__(self, directory: Path, nodes: int = 3, config: Sequence[str] = ()) -> None:
        self.nodes = [RedisServer(directory, cluster=True, config=config) for _ in range(nodes)]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self) -> RedisCluster:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        created = subprocess.run(
            ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout}{created.stderr}")
        deadline = time.monotonic() + 30
        while not all("cluster_state:ok" in node.cli("CLUSTER", "INFO") for node in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok in 30 s")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
