"""Fixtures: five real masters and daemons over them shared by the tests
that do not disturb them (plain, token authentication, TLS, mutual TLS);
masters and a daemon of its own for each test that stops them."""

from __future__ import annotations

import hashlib
import pathlib
import secrets
import sys
from typing import Iterator, NamedTuple

import grpc
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from cluster import Daemon, Masters  # noqa: E402
from pki import Pki  # noqa: E402

from redlockd_client import Client  # noqa: E402


@pytest.fixture(scope="session")
def masters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Masters]:
    cluster = Masters(tmp_path_factory.mktemp("masters"))
    yield cluster
    cluster.close()


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
def daemons(masters: Masters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemons]:
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
    started = []
    try:
        plain = Daemon(masters, tmp_path_factory.mktemp("daemon"))
        started.append(plain)
        # The health service answers without a token, as probes expect.
        auth = Daemon(masters, tmp_path_factory.mktemp("auth-daemon"), config=config)
        started.append(auth)
        tls_daemon = Daemon(
            masters,
            tmp_path_factory.mktemp("tls-daemon"),
            settings=tls,
            credentials=grpc.ssl_channel_credentials(root_certificates=pki.ca_pem),
            host="localhost",
        )
        started.append(tls_daemon)
        mtls_daemon = Daemon(
            masters,
            tmp_path_factory.mktemp("mtls-daemon"),
            settings={**tls, "server.tls.client_ca": str(pki.ca_cert)},
            credentials=grpc.ssl_channel_credentials(
                root_certificates=pki.ca_pem,
                private_key=pki.client_key_pem,
                certificate_chain=pki.client_cert_pem,
            ),
            host="localhost",
        )
        started.append(mtls_daemon)
        limited = Daemon(
            masters,
            tmp_path_factory.mktemp("limited-daemon"),
            settings={"limits.max_sessions": "1"},
        )
        started.append(limited)
        yield Daemons(
            plain,
            AuthDaemon(auth.address, token),
            TlsDaemon(tls_daemon.address, pki),
            TlsDaemon(mtls_daemon.address, pki),
            limited,
        )
    finally:
        for process in started:
            process.close()


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


class OwnCluster(NamedTuple):
    """Masters and a daemon for one test alone, which may stop them."""

    masters: Masters
    daemon: Daemon


@pytest.fixture
def own_cluster(tmp_path: pathlib.Path) -> Iterator[OwnCluster]:
    masters = Masters(tmp_path / "masters")
    try:
        daemon = Daemon(masters, tmp_path / "daemon")
        yield OwnCluster(masters, daemon)
        daemon.close()
    finally:
        masters.close()
