"""Fixtures: five real masters and a daemon shared by the tests that do not
disturb them; daemons with token authentication and with TLS over the same
masters; a cluster of its own for the test that stops masters."""

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


@pytest.fixture(scope="session")
def daemon(masters: Masters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    process = Daemon(masters, tmp_path_factory.mktemp("daemon"))
    yield process
    process.close()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with Client(daemon.address, timeout=30) as c:
        yield c


@pytest.fixture
def resource(request: pytest.FixtureRequest) -> str:
    """A resource name of the test's own."""
    return f"py-tests/{request.node.name}/{secrets.token_hex(4)}"


class AuthDaemon(NamedTuple):
    """A daemon that knows one client: `token`, limited to `orders/`."""

    address: str
    token: str


@pytest.fixture(scope="session")
def auth_daemon(
    masters: Masters, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AuthDaemon]:
    token = secrets.token_hex(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    config = (
        "[[auth.clients]]\n"
        'name = "orders"\n'
        f'token_sha256 = "{digest}"\n'
        'namespaces = ["orders/"]\n'
    )
    # The health service answers without a token, as probes expect.
    process = Daemon(masters, tmp_path_factory.mktemp("auth-daemon"), config=config)
    yield AuthDaemon(process.address, token)
    process.close()


class TlsDaemon(NamedTuple):
    """A daemon serving TLS with a certificate from a private CA (and, for
    `mtls`, asking for a client certificate from it)."""

    address: str
    pki: Pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def tls_daemon(
    masters: Masters, pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsDaemon]:
    process = Daemon(
        masters,
        tmp_path_factory.mktemp("tls-daemon"),
        settings={"server.tls.cert": str(pki.server_cert), "server.tls.key": str(pki.server_key)},
        credentials=grpc.ssl_channel_credentials(root_certificates=pki.ca_pem),
        host="localhost",
    )
    yield TlsDaemon(process.address, pki)
    process.close()


@pytest.fixture(scope="session")
def mtls_daemon(
    masters: Masters, pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsDaemon]:
    process = Daemon(
        masters,
        tmp_path_factory.mktemp("mtls-daemon"),
        settings={
            "server.tls.cert": str(pki.server_cert),
            "server.tls.key": str(pki.server_key),
            "server.tls.client_ca": str(pki.ca_cert),
        },
        credentials=grpc.ssl_channel_credentials(
            root_certificates=pki.ca_pem,
            private_key=pki.client_key_pem,
            certificate_chain=pki.client_cert_pem,
        ),
        host="localhost",
    )
    yield TlsDaemon(process.address, pki)
    process.close()
