"""A throw-away PKI for the proving ground: one CA, serving and client certificates."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "write_key"]

_VALIDITY = dt.timedelta(days=7)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_key(path: Path) -> tuple[Path, Path]:
    """Write a fresh EC key pair as ``path`` (private) and ``path.pub`` (public); return both."""
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(_pem_key(key))
    path.chmod(0o600)
    pub = path.with_suffix(".pub")
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path, pub


def _san(hostnames: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hostnames:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA whose certificate and key live in ``directory`` as ``ca.crt`` / ``ca.key``."""

    directory: Path

    @property
    def cert_path(self) -> Path:
        """PEM CA certificate (the cluster CA: clients, webhooks and kubeconfigs trust it)."""
        return self.directory / "ca.crt"

    @property
    def key_path(self) -> Path:
        """PEM CA private key."""
        return self.directory / "ca.key"

    @classmethod
    def create(
        cls, directory: Path, common_name: str = "dask-gpu-parity-ca"
    ) -> CertificateAuthority:
        """Generate a new self-signed CA in ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        ca = cls(directory)
        ca.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        ca.key_path.write_bytes(_pem_key(key))
        ca.key_path.chmod(0o600)
        return ca

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        hostnames: list[str] | None = None,
        organizations: list[str] | None = None,
        client: bool = False,
    ) -> tuple[Path, Path]:
        """Sign a serving (``hostnames``) or client (``client=True``) certificate.

        Returns:
            ``(cert_path, key_path)`` written as ``<name>.crt`` / ``<name>.key`` next to the CA.
        """
        ca_key = serialization.load_pem_private_key(self.key_path.read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"Unexpected CA key type in {self.key_path}")
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations or []]
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if hostnames:
            builder = builder.add_extension(_san(hostnames), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        cert_path = self.directory / f"{name}.crt"
        key_path = self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_pem_key(key))
        key_path.chmod(0o600)
        return cert_path, key_path
