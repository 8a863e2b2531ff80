"""A private CA made for the tests with `cryptography`: a server
certificate for localhost/127.0.0.1 and a client certificate, both signed
by it, written as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
import pathlib
from typing import List, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class Pki:
    """The CA and the certificates it signed, in `directory`."""

    def __init__(self, directory: pathlib.Path) -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        self._not_before = now - datetime.timedelta(hours=1)
        self._not_after = now + datetime.timedelta(days=1)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        self._ca = (
            x509.CertificateBuilder()
            .subject_name(_name("redlockd test CA"))
            .issuer_name(_name("redlockd test CA"))
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._ca_key.public_key()),
                critical=False,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_pem = self._ca.public_bytes(serialization.Encoding.PEM)
        server_cert, server_key = self._leaf(
            "localhost",
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
            ExtendedKeyUsageOID.SERVER_AUTH,
        )
        self.client_cert_pem, self.client_key_pem = self._leaf(
            "py-client", [x509.DNSName("py-client.test")], ExtendedKeyUsageOID.CLIENT_AUTH
        )
        self.ca_cert = directory / "ca.crt"
        self.server_cert = directory / "server.crt"
        self.server_key = directory / "server.key"
        self.client_cert = directory / "client.crt"
        self.client_key = directory / "client.key"
        self.ca_cert.write_bytes(self.ca_pem)
        self.server_cert.write_bytes(server_cert)
        self.server_key.write_bytes(server_key)
        self.client_cert.write_bytes(self.client_cert_pem)
        self.client_key.write_bytes(self.client_key_pem)

    def _leaf(
        self, common_name: str, names: List[x509.GeneralName], usage: x509.ObjectIdentifier
    ) -> Tuple[bytes, bytes]:
        """A certificate signed by the CA, and its key, as PEM."""
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self._ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key.public_key()),
                critical=False,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)
