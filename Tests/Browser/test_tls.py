"""TLS on every hop: `serve` terminates HTTPS itself (certificate and key files, taken up again when they change),
requires client certificates when given a CA (mutual TLS), and delivers to an https backend it verifies against a
private CA, presenting its own client certificate. Certificates are made here with `cryptography`."""

from __future__ import annotations

import base64
import datetime
import http.client
import ipaddress
import json
import os
import socket
import ssl
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import Node, Recorder, free_port, scan_for_secrets


class CA:
    """A throwaway certificate authority that issues server and client certificates for 127.0.0.1."""

    def __init__(self, folder: Path, name: str):
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"ProfileEscrow test CA {name}")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.certificate = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = folder / f"ca-{name}.pem"
        self.path.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, client: bool = False) -> tuple[Path, Path, int]:
        """Writes `<name>.pem` and `<name>.key`; returns their paths and the certificate's serial number."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        serial = x509.random_serial_number()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.certificate.subject).public_key(key.public_key()).serial_number(serial)
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        )
        if not client:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        certificate_path, key_path = self.folder / f"{name}.pem", self.folder / f"{name}.key"
        write_atomically(certificate_path, certificate.public_bytes(serialization.Encoding.PEM))
        write_atomically(key_path, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return certificate_path, key_path, serial


@pytest.fixture
def pki(tmp_path_factory) -> Path:
    """Where a test's certificates and keys go: beside the store's folder, not in it (its files are scanned for
    secrets, and a key file holds its own)."""
    return tmp_path_factory.mktemp("pki")


def write_atomically(path: Path, data: bytes):
    temporary = path.with_suffix(path.suffix + ".new")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def client_context(ca: CA, certificate: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.path))
    if certificate:
        context.load_cert_chain(str(certificate[0]), str(certificate[1]))
    return context


def get(url_port: int, path: str, context: ssl.SSLContext, headers: dict | None = None, method: str = "GET",
        body: bytes | None = None):
    connection = http.client.HTTPSConnection("127.0.0.1", url_port, context=context, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def served_serial(port: int, ca: CA) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with client_context(ca).wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_serve_answers_over_https_and_takes_up_a_renewed_certificate(folder, nodes, pki):
    ca = CA(pki, "server")
    certificate, key, first = ca.issue("server")
    token = folder.token("tls", "capture")
    node = Node(folder, "--no-worker", "--tls-certificate", str(certificate), "--tls-key", str(key))
    nodes.append(node.start(tls=client_context(ca)))

    status, body = get(node.port, "/v1/escrows", client_context(ca), method="POST",
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                       body=json.dumps({"userIdentifier": "000000.tlscanary.0001",
                                        "email": "tls.canary@example.invalid"}).encode())
    assert status == 201, body
    assert served_serial(node.port, ca) == first
    # Plain HTTP on the TLS port is not served.
    connection = http.client.HTTPConnection("127.0.0.1", node.port, timeout=5)
    try:
        connection.request("GET", "/healthz")
        answered = connection.getresponse().status
    except (ConnectionError, http.client.HTTPException, OSError):
        answered = None
    finally:
        connection.close()
    assert answered in (None, 400), f"plain HTTP answered {answered} on the TLS listener"

    # A renewed certificate is served from a later handshake on, without a restart.
    _, _, second = ca.issue("server")
    deadline = time.monotonic() + 15
    while served_serial(node.port, ca) != second:
        assert time.monotonic() < deadline, "the renewed certificate was not taken up"
        time.sleep(0.3)

    # A broken renewal is refused, and the certificate in use stays.
    write_atomically(certificate, b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    time.sleep(6)  # the files are looked at every 5 s
    assert served_serial(node.port, ca) == second
    assert node.process.poll() is None
    assert "TLS certificate not reloaded" in node.log.read_text()
    scan_for_secrets(folder, ["tls.canary@example.invalid", token, key.read_text().splitlines()[1]])


def test_mutual_tls_refuses_callers_without_a_certificate_from_the_client_ca(folder, nodes, pki):
    server_ca, client_ca, other_ca = CA(pki, "server"), CA(pki, "clients"), CA(pki, "other")
    certificate, key, _ = server_ca.issue("server")
    trusted = client_ca.issue("caller", client=True)[:2]
    untrusted = other_ca.issue("stranger", client=True)[:2]
    node = Node(folder, "--no-worker", "--tls-certificate", str(certificate), "--tls-key", str(key),
                "--tls-client-ca", str(client_ca.path))
    nodes.append(node.start(tls=client_context(server_ca, trusted)))
    status, _ = get(node.port, "/healthz", client_context(server_ca, trusted))
    assert status == 200
    for refused in (None, untrusted):
        try:
            status, _ = get(node.port, "/healthz", client_context(server_ca, refused))
        except (OSError, ssl.SSLError, http.client.HTTPException):
            status = None
        assert status is None, f"answered {status} to a caller with {'no' if refused is None else 'a foreign'} certificate"


def test_a_tls_file_that_does_not_load_stops_the_start_naming_it(folder, pki):
    ca = CA(pki, "server")
    certificate, key, _ = ca.issue("server")
    _, other_key, _ = ca.issue("other")
    cases = [
        (["--tls-certificate", str(certificate), "--tls-key", str(pki / "missing.key")], "missing.key"),
        (["--tls-certificate", str(certificate), "--tls-key", str(other_key)], "other.key"),
        (["--tls-certificate", str(certificate)], "--tls-key"),
    ]
    for arguments, named in cases:
        result = folder.cli("serve", "--no-worker", "--port", str(free_port()), *arguments, check=False)
        assert result.returncode == 2, (arguments, result.stderr)
        assert named in result.stderr, (arguments, result.stderr)
        assert "PRIVATE KEY" not in result.stderr


def https_backend(ca: CA, client_ca: CA) -> Recorder:
    """An https backend that requires a client certificate from `client_ca`, and records deliveries."""
    certificate, key, _ = ca.issue("backend")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certificate), str(key))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(str(client_ca.path))
    return Recorder(tls=context)


def test_deliveries_verify_a_private_ca_and_present_a_client_certificate(folder, pki):
    backend_ca, worker_ca = CA(pki, "backend"), CA(pki, "workers")
    client_certificate, client_key, _ = worker_ca.issue("worker", client=True)
    backend = https_backend(backend_ca, worker_ca)
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    env = {"PROFILE_ESCROW_BACKEND_URL": backend.url + "/register", "PROFILE_ESCROW_WEBHOOK_SECRET": secret}
    try:
        folder.cli("capture", stdin=json.dumps({"userIdentifier": "000000.tlsbackend.0001",
                                                "email": "tls.backend@example.invalid"}))
        fast = ["--backoff-base", "1ms", "--backoff-max", "1ms"]

        def attempts() -> int:
            status = json.loads(folder.cli("status", "000000.tlsbackend.0001", "--format", "json").stdout)
            return status["attempts"]

        # Without the backend's CA: its certificate is not trusted, nothing is delivered, the attempt counts.
        folder.cli("replay", "--once", *fast, check=False, env=env)
        assert backend.snapshot() == [] and attempts() == 1
        # Trusting the CA but without a client certificate: the backend refuses the handshake.
        time.sleep(0.1)
        folder.cli("replay", "--once", *fast, check=False,
                   env={**env, "PROFILE_ESCROW_BACKEND_CA": str(backend_ca.path)})
        assert backend.snapshot() == [] and attempts() == 2
        # Both: delivered, confirmed, purged.
        deadline = time.monotonic() + 30
        while not backend.snapshot():
            assert time.monotonic() < deadline, "never delivered"
            folder.cli("replay", "--once", *fast, "--backend-ca", str(backend_ca.path),
                                "--backend-client-certificate", str(client_certificate),
                                "--backend-client-key", str(client_key), check=False, env=env)
            time.sleep(0.5)
        assert backend.snapshot()[0].peer["subject"] == ((("commonName", "worker"),),)
        assert folder.cli("status", "000000.tlsbackend.0001", check=False).returncode == 3   # purged: not found
    finally:
        backend.close()
    scan_for_secrets(folder, ["tls.backend@example.invalid", secret])
