"""Real masters and daemons for the Python side of the tests: the Python
client's tests, the conformance harness and the four-runtime check. They
come from the test kit's launcher, redlockd-cluster (its protocol:
crates/redlockd-testkit/src/bin/redlockd-cluster/main.rs), which starts
valkey-server masters on free loopback ports and redlockd daemons over
them, configured as operators configure the daemon, waits until each
serves, and answers commands on its stdin; closing its stdin stops
everything. Stdlib only.

Launcher: $REDLOCKD_CLUSTER_BIN, else <repo>/target/debug/redlockd-cluster
(cargo build --workspace --bins). It finds valkey-server
($REDLOCKD_VALKEY_BIN, after `source .venv/redlockd-env`) and redlockd
($REDLOCKD_BIN, else the workspace's) itself.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import signal
import socket
import subprocess
import threading
from typing import Any, Dict, List, Mapping, Optional, Union

REPO = pathlib.Path(__file__).resolve().parents[1]
#: Longest wait for one line of the launcher, whose own waits are bounded
#: (60 s for a daemon to serve).
LINE_LIMIT = 90.0


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def options(settings: Optional[Mapping[str, str]] = None, toml: Optional[str] = None) -> List[str]:
    """The launcher's options for a daemon with extra configuration keys
    as in config/redlockd.toml (`server.tls.cert`) and a configuration
    file's text (`[[auth.clients]]`)."""
    words: List[str] = []
    for key, value in (settings or {}).items():
        words += ["--set", f"{key}={value}"]
    if toml is not None:
        words += ["--toml", toml]
    return words


class Daemon:
    """One daemon of a cluster, as its launcher's answer describes it."""

    def __init__(self, cluster: "Cluster", fields: Dict[str, Any]) -> None:
        self.cluster = cluster
        self.index = str(fields["index"])
        #: `127.0.0.1:PORT`.
        self.address: str = fields["addr"]
        self.port = int(self.address.rsplit(":", 1)[1])
        #: The HTTP gateway's `127.0.0.1:PORT` (with `--http`).
        self.http: Optional[str] = fields.get("http")
        #: The CA file of its certificate (with `--tls`).
        self.ca: Optional[str] = fields.get("ca")

    def slow_answers(self, delay: float) -> str:
        """The address of a proxy to this daemon (the launcher's) that
        passes the client's bytes at once and delivers the daemon's `delay`
        seconds after it sent them, in order: the daemon grants and answers
        in time, and its answer reaches the client after its deadline."""
        return str(self.cluster.ask("slow-answers", self.index, str(round(delay * 1000)))["addr"])

    def send_signal(self, sig: Union[int, str]) -> None:
        """Sends a signal (`signal.SIGTERM`, or a name: `TERM`, `STOP`)."""
        name = sig if isinstance(sig, str) else signal.Signals(sig).name
        self.cluster.ask("signal", self.index, name)


class Masters:
    """A cluster's masters, by index."""

    def __init__(self, cluster: "Cluster", ports: List[int]) -> None:
        self.cluster = cluster
        self.ports = ports

    def stop(self, i: int) -> None:
        """Kills master `i` (SIGKILL): its keys are gone with it."""
        self.cluster.ask("stop-master", str(i))


class Cluster:
    """A running launcher: masters, the first daemon (`daemon`) and any
    started since. A context manager; `close()` stops everything."""

    def __init__(self, *daemon_options: str, masters: int = 5) -> None:
        binary = os.environ.get("REDLOCKD_CLUSTER_BIN") or str(REPO / "target" / "debug" / "redlockd-cluster")
        try:
            self.process = subprocess.Popen(
                [binary, "--masters", str(masters), *daemon_options],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
            )
        except OSError as error:
            raise RuntimeError(f"cannot start {binary} (cargo build --workspace --bins): {error}") from error
        self.lock = threading.Lock()
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            started = self._next()
        except BaseException:
            self.close()
            raise
        self.masters = Masters(self, [int(m["port"]) for m in started["masters"]])
        self.daemon = Daemon(self, started["daemon"])

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _next(self) -> Dict[str, Any]:
        try:
            line = self.lines.get(timeout=LINE_LIMIT)
        except queue.Empty:
            raise RuntimeError(f"redlockd-cluster: no answer within {LINE_LIMIT} s") from None
        if line is None:
            raise RuntimeError("redlockd-cluster ended without answering (its stderr says why)")
        answer: Dict[str, Any] = json.loads(line)
        if not answer["ok"]:
            raise RuntimeError(f"redlockd-cluster: {answer['error']}")
        return answer

    def ask(self, *words: str) -> Dict[str, Any]:
        """Sends one command (a JSON array of words); its answer."""
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(list(words)) + "\n")
            self.process.stdin.flush()
            return self._next()

    def start_daemon(self, *daemon_options: str) -> Daemon:
        """One more daemon over the same masters, serving when returned."""
        return Daemon(self, self.ask("daemon", *daemon_options)["daemon"])

    def close(self) -> None:
        """Closes the launcher's stdin, which stops every process it
        started, and waits for it (killing it past the bound)."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(LINE_LIMIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
