"""The region server as the tests set it up from outside its process.

A self-signed certificate and key for its TLS (made with ``cryptography``), and its command
line run to completion, for the refusals that end it before it serves.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places

REPO = str(paths.REPO)


def self_signed_certificate(directory, name: str = "localhost") -> tuple[str, str]:
    """A self-signed certificate for localhost and 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(directory, f"{name}.crt"), os.path.join(directory, f"{name}.key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def run_server_command(*args: str) -> subprocess.CompletedProcess:
    """``python -m storage.server *args`` run to its end (a refusal, say): its exit code and output."""
    return subprocess.run([sys.executable, "-m", "storage.server", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": REPO})
