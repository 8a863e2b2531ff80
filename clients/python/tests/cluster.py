"""Real processes for the tests: valkey-server masters and a redlockd
daemon, on free loopback ports, configured the way operators configure
the daemon (REDLOCKD__SECTION__KEY variables, and a TOML file for what
needs one), each waited for until it serves and stopped at the end."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
from typing import Dict, List, Optional

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = pathlib.Path(__file__).resolve().parents[3]
#: Longest any process may take to start serving (two cores shared by
#: many builds: generous).
START_LIMIT = 60.0
#: Longest a process may take to stop after SIGTERM before SIGKILL.
STOP_LIMIT = 15.0


def valkey_bin() -> str:
    """$REDLOCKD_VALKEY_BIN (set by `source .venv/redlockd-env`), else
    valkey-server or redis-server on PATH."""
    found = os.environ.get("REDLOCKD_VALKEY_BIN") or shutil.which("valkey-server")
    found = found or shutil.which("redis-server")
    if not found:
        raise RuntimeError("no valkey-server: run scripts/setup.sh and source .venv/redlockd-env")
    return found


def daemon_bin() -> str:
    """$REDLOCKD_BIN, else the workspace's debug build."""
    path = os.environ.get("REDLOCKD_BIN") or str(REPO / "target" / "debug" / "redlockd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no daemon at {path}: cargo build -p redlockd --bin redlockd")
    return path


def free_port() -> int:
    """A loopback port that was free a moment ago (callers retry if it is
    taken by the time they bind it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL past STOP_LIMIT."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_LIMIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_LIMIT)


def _pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class Masters:
    """Independent valkey-server processes without persistence."""

    def __init__(self, workdir: pathlib.Path, count: int = 5) -> None:
        self.workdir = workdir
        self.processes: List[subprocess.Popen] = []
        self.ports: List[int] = []
        for i in range(count):
            self._start(i)

    def _start(self, i: int) -> None:
        directory = self.workdir / f"master-{i}"
        directory.mkdir(parents=True, exist_ok=True)
        for _attempt in range(5):
            port = free_port()
            process = subprocess.Popen(
                [valkey_bin(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no",
                 "--loglevel", "warning", "--dir", str(directory)],
                stdout=subprocess.DEVNULL,
                stderr=open(directory / "log", "ab"),
            )
            deadline = time.monotonic() + START_LIMIT
            while process.poll() is None and time.monotonic() < deadline:
                if _pings(port):
                    self.processes.append(process)
                    self.ports.append(port)
                    return
                time.sleep(0.05)
            stop(process)  # the port was taken, or it never answered: again
        raise RuntimeError(f"master {i} did not start; see {directory / 'log'}")

    @property
    def nodes(self) -> str:
        """The value of `redlock.nodes`."""
        return ",".join(f"redis://127.0.0.1:{port}" for port in self.ports)

    def stop(self, i: int) -> None:
        """Stops master `i` for good."""
        stop(self.processes[i])

    def close(self) -> None:
        """Stops every master."""
        for process in self.processes:
            stop(process)


def env_name(key: str) -> str:
    """`server.tls.cert` -> `REDLOCKD__SERVER__TLS__CERT`."""
    return "REDLOCKD__" + key.replace(".", "__").upper()


class Daemon:
    """One redlockd process over `masters`, waited for until its gRPC
    health service says SERVING for redlock.v1.LockService."""

    def __init__(
        self,
        masters: Masters,
        workdir: pathlib.Path,
        settings: Optional[Dict[str, str]] = None,
        config: Optional[str] = None,
        credentials: Optional[grpc.ChannelCredentials] = None,
        host: str = "127.0.0.1",
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / "daemon.log"
        args = [daemon_bin()]
        if config is not None:
            path = workdir / "redlockd.toml"
            path.write_text(config)
            args += ["--config", str(path)]
        for _attempt in range(5):
            port = free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("REDLOCKD__")}
            env.setdefault("RUST_LOG", "warn")
            values = {
                "redlock.nodes": masters.nodes,
                "metrics.enabled": "false",
                "server.listen": f"127.0.0.1:{port}",
                **(settings or {}),
            }
            env.update({env_name(k): v for k, v in values.items()})
            self.process = subprocess.Popen(
                args, env=env, stdin=subprocess.DEVNULL, stdout=open(self.log, "ab"),
                stderr=subprocess.STDOUT,
            )
            self.address = f"{host}:{port}"
            if self._wait_serving(credentials):
                return
            stop(self.process)
        raise RuntimeError(f"the daemon did not serve; its log:\n{self.log.read_text()[-3000:]}")

    def _wait_serving(self, credentials: Optional[grpc.ChannelCredentials]) -> bool:
        channel = (
            grpc.secure_channel(self.address, credentials)
            if credentials is not None
            else grpc.insecure_channel(self.address)
        )
        health = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="redlock.v1.LockService")
        deadline = time.monotonic() + START_LIMIT
        try:
            while self.process.poll() is None and time.monotonic() < deadline:
                try:
                    answer = health.Check(request, timeout=2)
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        return True
                except grpc.RpcError:
                    pass
                time.sleep(0.1)
            return False
        finally:
            channel.close()

    def close(self) -> None:
        """Stops the daemon."""
        stop(self.process)
