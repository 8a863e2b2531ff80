"""Bearer tokens and TLS with a private CA, against daemons configured
for them."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from redlockd_client import (
    AsyncClient,
    Client,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)


def test_token_is_sent_as_bearer(auth_daemon) -> None:
    with Client(auth_daemon.address, token=auth_daemon.token, timeout=30) as client:
        lock = client.acquire("orders/py-token", ttl=5)
        assert client.release(lock).was_held
        with pytest.raises(PermissionDenied) as outside:
            client.acquire("jobs/py-token", ttl=5)
        assert outside.value.code == grpc.StatusCode.PERMISSION_DENIED
        with client.hold("orders/py-token-hold", ttl=5) as lease:
            lease.check()
        assert lease.was_held


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_missing_or_wrong_token_is_unauthenticated(auth_daemon, token) -> None:
    with Client(auth_daemon.address, token=token, timeout=30) as client:
        with pytest.raises(Unauthenticated) as refused:
            client.acquire("orders/py-token", ttl=5)
        assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(Unauthenticated):
            with client.hold("orders/py-token", ttl=5):
                pytest.fail("a session without a valid token")


def test_async_token(auth_daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(auth_daemon.address, token=auth_daemon.token, timeout=30) as client:
            lock = await client.acquire("orders/py-async-token", ttl=5)
            assert (await client.release(lock)).was_held
        async with AsyncClient(auth_daemon.address, timeout=30) as anonymous:
            with pytest.raises(Unauthenticated):
                await anonymous.acquire("orders/py-async-token", ttl=5)

    asyncio.run(scenario())


def test_tls_with_a_private_ca(tls_daemon) -> None:
    with Client(tls_daemon.address, root_certificates=tls_daemon.pki.ca_pem, timeout=30) as client:
        lock = client.acquire("py-tls/one", ttl=5)
        assert client.release(lock).was_held
        with client.hold("py-tls/hold", ttl=5) as lease:
            lease.check()
        assert lease.was_held


def test_tls_refuses_an_unknown_server(tls_daemon) -> None:
    # The system's roots do not include the private CA.
    with Client(f"https://{tls_daemon.address}", timeout=10) as client:
        with pytest.raises(Unavailable):
            client.acquire("py-tls/two", ttl=5)
    # Plaintext to a TLS port gets nowhere either.
    with Client(tls_daemon.address, timeout=10) as client:
        with pytest.raises(Unavailable):
            client.acquire("py-tls/two", ttl=5)


def test_mutual_tls(mtls_daemon) -> None:
    pki = mtls_daemon.pki
    with Client(
        mtls_daemon.address,
        root_certificates=pki.ca_pem,
        private_key=pki.client_key_pem,
        certificate_chain=pki.client_cert_pem,
        timeout=30,
    ) as client:
        lock = client.acquire("py-mtls/one", ttl=5)
        assert client.release(lock).was_held
    with Client(mtls_daemon.address, root_certificates=pki.ca_pem, timeout=10) as client:
        with pytest.raises(Unavailable):
            client.acquire("py-mtls/one", ttl=5)


def test_async_tls(tls_daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(
            tls_daemon.address, root_certificates=tls_daemon.pki.ca_pem, timeout=30
        ) as client:
            async with client.hold("py-tls/async", ttl=5) as lease:
                lease.check()
            assert lease.was_held

    asyncio.run(scenario())
