"""Fixtures: five real masters and daemons over them shared by the tests
that do not disturb them (plain, token authentication, TLS, mutual TLS,
one session at most); masters and a daemon of its own for each test that
stops them. All from the test kit's launcher, through clients/cluster.py."""

from __future__ import annotations

import hashlib
import pathlib
import secrets
import sys
from typing import Iterator, NamedTuple

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))  # clients/: cluster.py

from cluster import Cluster, Daemon, options  # noqa: E402
from pki import Pki  # noqa: E402

from redlockd_client import Client  # noqa: E402


class AuthDaemon(NamedTuple):
    """A daemon that knows one client: `token`, limited to `orders/`."""

    address: str
    token: str


class TlsDaemon(NamedTuple):
    """A daemon serving TLS with a certificate from a private CA (and, for
    `mtls`, asking for a client certificate from it)."""

    address: str
    pki: Pki


class Daemons(NamedTuple):
    """The shared daemons, all over the same masters."""

    plain: Daemon
    auth: AuthDaemon
    tls: TlsDaemon
    mtls: TlsDaemon
    #: At most one open session (`limits.max_sessions = 1`).
    limited: Daemon


@pytest.fixture(scope="session")
def daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemons]:
    """Every shared daemon (plain, token authentication, TLS, mutual TLS,
    one session at most), started together while the masters are fresh:
    a daemon started later would find masters that came up moments ago
    holding locks, and sit out their restart quarantine (as it should)."""
    token = secrets.token_hex(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    config = (
        "[[auth.clients]]\n"
        'name = "orders"\n'
        f'token_sha256 = "{digest}"\n'
        'namespaces = ["orders/"]\n'
    )
    pki = Pki(tmp_path_factory.mktemp("pki"))
    tls = {"server.tls.cert": str(pki.server_cert), "server.tls.key": str(pki.server_key)}
    probe = ["--probe-ca", str(pki.ca_cert)]
    with Cluster() as cluster:
        # The health service answers without a token, as probes expect.
        auth = cluster.start_daemon(*options(toml=config))
        tls_daemon = cluster.start_daemon(*options(tls), *probe)
        mtls_daemon = cluster.start_daemon(
            *options({**tls, "server.tls.client_ca": str(pki.ca_cert)}),
            *probe, "--probe-cert", str(pki.client_cert), "--probe-key", str(pki.client_key),
        )
        limited = cluster.start_daemon(*options({"limits.max_sessions": "1"}))
        yield Daemons(
            cluster.daemon,
            AuthDaemon(auth.address, token),
            # By name: the certificate's names are localhost and 127.0.0.1.
            TlsDaemon(f"localhost:{tls_daemon.port}", pki),
            TlsDaemon(f"localhost:{mtls_daemon.port}", pki),
            limited,
        )


@pytest.fixture
def daemon(daemons: Daemons) -> Daemon:
    return daemons.plain


@pytest.fixture
def auth_daemon(daemons: Daemons) -> AuthDaemon:
    return daemons.auth


@pytest.fixture
def tls_daemon(daemons: Daemons) -> TlsDaemon:
    return daemons.tls


@pytest.fixture
def mtls_daemon(daemons: Daemons) -> TlsDaemon:
    return daemons.mtls


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with Client(daemon.address, timeout=30) as c:
        yield c


@pytest.fixture
def resource(request: pytest.FixtureRequest) -> str:
    """A resource name of the test's own."""
    return f"py-tests/{request.node.name}/{secrets.token_hex(4)}"


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """Masters and a daemon for one test alone, which may stop them
    (`own_cluster.masters.stop(i)`, `own_cluster.daemon.send_signal(...)`)."""
    with Cluster() as cluster:
        yield cluster
