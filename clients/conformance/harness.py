#!/usr/bin/env python3
"""The conformance harness: one run of clients/conformance/scenarios.json
through every client's runner, against real masters and daemons.

For each client it starts (Python stdlib only, openssl for the private CA):
  * five valkey-server masters shared by three daemons: `plain`, `token`
    ([[auth.clients]] with namespaces ["conf/"]) and `tls` (a server
    certificate from a private CA made here);
  * five more masters under a `fragile` daemon, three of which the
    `stop_three_masters` fault kills;
  * a `drain` daemon over the first masters, which the `drain_daemon`
    fault sends SIGTERM (shutdown_grace 3 s);
  * `slow`: a TCP proxy to `plain` that delivers the daemon's bytes
    SLOW_ANSWERS_DELAY after it sent them (the client's at once), so that
    a grant made in time reaches the client after its deadline fired.
Every client gets its own set, so that one client's faults never reach
another's scenarios. The runner gets the scenarios file and an environment
file (the clients it may build: address, token, CA file) and speaks a line
protocol on its stdout/stdin:
  FAULT <name>              the harness injects it, then answers `ok <name>`
                            (or `error <reason>`) on the runner's stdin;
  PASS <scenario id>
  FAIL <scenario id> <why>
  anything else             the runner's own diagnostics, echoed
                            (its stderr is passed through as it is).
A scenario without a PASS line is a failure: a runner that cannot run a
scenario fails it, never skips it. Prints `conformance: <client> <n>/<m>`
per client and exits non-zero unless every client passed every scenario.

Usage: harness.py [client ...]   (default: python node go java)
Environment: REDLOCKD_VALKEY_BIN (masters), REDLOCKD_BIN (the daemon,
default target/debug/redlockd), CONFORMANCE_PYTHON (the interpreter with
redlockd_client installed, default target/python-client/venv/bin/python),
CONFORMANCE_JAVA_CP (the Java runner's classpath; runners/java/run.sh
builds it when unset).
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCENARIOS = HERE / "scenarios.json"

#: Longest wait for a process to listen, in seconds.
START_LIMIT = 30.0
#: Longest run of one client's runner, in seconds (every scenario included).
RUNNER_LIMIT = 300.0
#: The bearer token of the `token` client (a test value, not a secret).
TOKEN = "conformance-5d1c7e2a9b4f6e8d0a3c5b7e9f1d2c4a"
#: How late the `slow` client's proxy delivers the daemon's answers, in seconds.
SLOW_ANSWERS_DELAY = 0.3


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen, log: Path) -> None:
    """Polls until something accepts connections on 127.0.0.1:port."""
    limit = time.monotonic() + START_LIMIT
    while time.monotonic() < limit:
        if proc.poll() is not None:
            raise RuntimeError(f"exited ({proc.returncode}) before listening on {port}:\n{tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listened on {port} within {START_LIMIT}s:\n{tail(log)}")


#: What redlockd logs when its health turns SERVING (a quorum of masters up).
SERVING = "a quorum of masters is up: SERVING"


def wait_serving(proc: subprocess.Popen, log: Path) -> None:
    """Polls the daemon's log until its health says SERVING: listening alone
    does not mean a quorum of masters answers yet (the harness has no gRPC
    health client, being stdlib only)."""
    limit = time.monotonic() + START_LIMIT
    while time.monotonic() < limit:
        if proc.poll() is not None:
            raise RuntimeError(f"redlockd exited ({proc.returncode}) before serving:\n{tail(log)}")
        if SERVING in log.read_text(errors="replace"):
            return
        time.sleep(0.02)
    raise RuntimeError(f"redlockd not SERVING within {START_LIMIT}s:\n{tail(log)}")


def tail(log: Path) -> str:
    """The last lines of a process's log, for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    except OSError as error:
        return f"(no log: {error})"


class SlowAnswers:
    """A TCP proxy to `upstream` (host:port) that passes the client's bytes
    at once and delivers the server's `delay` seconds after it sent them,
    in order: latency on the answers only. Threads; close() ends it."""

    def __init__(self, upstream: str, delay: float) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.delay = delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: List[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                inbound, _ = self.listener.accept()
                outbound = socket.create_connection(self.upstream, timeout=1)
            except OSError:
                return
            outbound.settimeout(None)
            self.sockets += [inbound, outbound]
            chunks: "queue.Queue[tuple[float, bytes]]" = queue.Queue()
            threading.Thread(target=self._pass, args=(inbound, outbound), daemon=True).start()
            threading.Thread(target=self._read, args=(outbound, chunks), daemon=True).start()
            threading.Thread(target=self._deliver, args=(chunks, inbound), daemon=True).start()

    @staticmethod
    def _pass(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def _read(self, server: socket.socket, chunks: "queue.Queue[tuple[float, bytes]]") -> None:
        try:
            while data := server.recv(65536):
                chunks.put((time.monotonic() + self.delay, data))
        except OSError:
            pass
        chunks.put((0.0, b""))

    @staticmethod
    def _deliver(chunks: "queue.Queue[tuple[float, bytes]]", client: socket.socket) -> None:
        try:
            while True:
                due, data = chunks.get()
                if not data:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                client.sendall(data)
        except OSError:
            pass
        client.close()

    def close(self) -> None:
        self.closed = True
        for s in [self.listener, *self.sockets]:
            try:
                s.close()
            except OSError:
                pass


class Processes:
    """Every process started for one client, killed together."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        self.procs: List[subprocess.Popen] = []

    def start(self, args: List[str], env: Dict[str, str], name: str) -> "tuple[subprocess.Popen, Path]":
        log = self.dir / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        self.procs.append(proc)
        return proc, log

    def masters(self, name: str, count: int = 5) -> List["tuple[subprocess.Popen, int]"]:
        """`count` valkey-server masters without persistence, listening."""
        binary = os.environ.get("REDLOCKD_VALKEY_BIN") or shutil.which("valkey-server") or "valkey-server"
        started = []
        for i in range(count):
            port = free_port()
            args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
                    "--dir", str(self.dir)]
            proc, log = self.start(args, dict(os.environ), f"{name}-master-{i}")
            started.append((proc, port, log))
        for proc, port, log in started:
            wait_listening(port, proc, log)
        return [(proc, port) for proc, port, _ in started]

    def daemon(self, name: str, masters: List["tuple[subprocess.Popen, int]"],
               settings: Optional[Dict[str, str]] = None, toml: Optional[str] = None) -> "tuple[subprocess.Popen, str]":
        """A redlockd over `masters`, configured as operators do
        (REDLOCKD__SECTION__KEY variables, a TOML file for [[auth.clients]])."""
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("REDLOCKD__")}
        values = {
            "redlock.nodes": ",".join(f"redis://127.0.0.1:{p}" for _, p in masters),
            "redlock.node_timeout": "50ms",
            "server.listen": f"127.0.0.1:{port}",
            "metrics.enabled": "false",
            "server.shutdown_grace": "1s",
            **(settings or {}),
        }
        for key, value in values.items():
            env["REDLOCKD__" + key.replace(".", "__").upper()] = value
        # The health loop's info line is the readiness signal (see wait_serving).
        env["RUST_LOG"] = "warn,redlockd::health=info"
        binary = os.environ.get("REDLOCKD_BIN") or str(REPO / "target" / "debug" / "redlockd")
        args = [binary]
        if toml is not None:
            config = self.dir / f"{name}.toml"
            config.write_text(toml)
            args += ["--config", str(config)]
        proc, log = self.start(args, env, f"{name}-daemon")
        wait_listening(port, proc, log)
        wait_serving(proc, log)
        return proc, f"127.0.0.1:{port}"

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def make_pki(dir: Path) -> Dict[str, Path]:
    """A private CA and a server certificate for 127.0.0.1/localhost (openssl CLI)."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=dir, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=redlockd conformance CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    (dir / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=server")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "server.ext")
    return {"ca": dir / "ca.crt", "cert": dir / "server.crt", "key": dir / "server.key"}


def runner_command(client: str) -> List[str]:
    """How to start `client`'s runner (its arguments follow)."""
    runners = HERE / "runners"
    if client == "python":
        python = os.environ.get("CONFORMANCE_PYTHON") or str(REPO / "target" / "python-client" / "venv" / "bin" / "python")
        return [python, str(runners / "python" / "runner.py")]
    if client == "node":
        return ["node", str(runners / "node" / "runner.mjs")]
    if client == "go":
        return ["bash", str(runners / "go" / "run.sh")]
    if client == "java":
        return ["bash", str(runners / "java" / "run.sh")]
    raise SystemExit(f"harness: unknown client {client} (python, node, go, java)")


def run_client(client: str, ids: List[str], base: Path) -> int:
    """Starts `client`'s daemons, runs its runner; returns how many scenarios passed."""
    dir = Path(tempfile.mkdtemp(prefix=f"{client}-", dir=base))
    procs = Processes(dir)
    slow: Optional[SlowAnswers] = None
    try:
        pki = make_pki(dir)
        shared = procs.masters("shared")
        _, plain = procs.daemon("plain", shared)
        sha = hashlib.sha256(TOKEN.encode()).hexdigest()
        toml = f'[[auth.clients]]\nname = "conformance"\ntoken_sha256 = "{sha}"\nnamespaces = ["conf/"]\n'
        _, token = procs.daemon("token", shared, toml=toml)
        _, tls = procs.daemon("tls", shared, settings={
            "server.tls.cert": str(pki["cert"]), "server.tls.key": str(pki["key"])})
        fragile_masters = procs.masters("fragile")
        _, fragile = procs.daemon("fragile", fragile_masters)
        # A drain of 3 s: long enough for the draining event to reach a
        # client on a busy machine, short enough to keep the run quick.
        drain_proc, drain = procs.daemon("drain", shared, settings={"server.shutdown_grace": "3s"})
        slow = SlowAnswers(plain, SLOW_ANSWERS_DELAY)

        def fault(name: str) -> str:
            if name == "stop_three_masters":
                for proc, _ in fragile_masters[:3]:
                    proc.kill()
                    proc.wait(timeout=10)
                return "ok"
            if name == "drain_daemon":
                drain_proc.send_signal(signal.SIGTERM)
                return "ok"
            return f"error unknown fault {name}"

        env = {
            "prefix": f"{client}/",
            "clients": {
                "plain": {"address": plain},
                "no_token": {"address": token},
                "token": {"address": token, "token": TOKEN},
                "wrong_token": {"address": token, "token": TOKEN[::-1]},
                "tls": {"address": tls, "ca_file": str(pki["ca"])},
                "tls_untrusted": {"address": tls, "tls": True},
                "fragile": {"address": fragile},
                "drain": {"address": drain},
                "slow": {"address": slow.address},
            },
        }
        env_file = dir / "env.json"
        env_file.write_text(json.dumps(env, indent=2))
        return drive(client, runner_command(client) + [str(SCENARIOS), str(env_file)], ids, fault)
    finally:
        if slow is not None:
            slow.close()
        procs.stop()
        shutil.rmtree(dir, ignore_errors=True)


def drive(client: str, command: List[str], ids: List[str], fault) -> int:
    """Runs a runner, answering its FAULT lines; counts its PASS lines."""
    passed: Dict[str, bool] = {}
    # The runner's stderr (build tools, gRPC's own logs) goes straight to ours:
    # only its stdout speaks the protocol.
    proc = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=None, text=True, bufsize=1)
    timer = threading.Timer(RUNNER_LIMIT, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            word, _, rest = line.partition(" ")
            if word == "FAULT":
                answer = fault(rest.strip())
                print(f"  [{client}] fault {rest.strip()}: {answer}", flush=True)
                proc.stdin.write(f"{answer}\n")
                proc.stdin.flush()
            elif word in ("PASS", "FAIL"):
                id, _, why = rest.partition(" ")
                if id not in ids:
                    print(f"  [{client}] result for an unknown scenario: {line}", flush=True)
                    continue
                if id in passed:
                    print(f"  [{client}] second result for {id}: {line}", flush=True)
                    passed[id] = False
                    continue
                passed[id] = word == "PASS"
                print(f"  [{client}] {line}", flush=True)
            else:
                print(f"  [{client}] | {line}", flush=True)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for id in ids:
        if id not in passed:
            print(f"  [{client}] FAIL {id} (the runner reported nothing)", flush=True)
    if proc.returncode != 0:
        print(f"  [{client}] runner exited with {proc.returncode}", flush=True)
    return sum(1 for id in ids if passed.get(id))


def main(argv: List[str]) -> int:
    # `timeout` (CI's step bound) sends SIGTERM: unwind, so that every
    # master, daemon and runner started here is killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    clients = argv or ["python", "node", "go", "java"]
    ids = [s["id"] for s in json.loads(SCENARIOS.read_text())["scenarios"]]
    if len(set(ids)) != len(ids):
        raise SystemExit("harness: scenario ids must be unique")
    results = {}
    with tempfile.TemporaryDirectory(prefix="redlockd-conformance-") as base:
        for client in clients:
            started = time.monotonic()
            print(f"--- {client}", flush=True)
            try:
                results[client] = run_client(client, ids, Path(base))
            except Exception as error:  # a daemon that did not start: every scenario failed
                print(f"  [{client}] harness error: {error}", flush=True)
                results[client] = 0
            print(f"  [{client}] {time.monotonic() - started:.1f}s", flush=True)
    for client in clients:
        print(f"conformance: {client} {results[client]}/{len(ids)}")
    return 0 if all(results[c] == len(ids) for c in clients) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
