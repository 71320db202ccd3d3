"""The client over TLS and mutual TLS, against the real server with openssl-made certificates."""

from __future__ import annotations

from typing import Any, Dict

import pytest

import adapterd
from conftest import AdapterdServer
from tls_certs import make_certs  # tests/testing, on PYTHONPATH

# Failed handshakes must not be retried for long: one attempt, a short deadline.
NO_RETRY: Dict[str, Any] = dict(retries=0, timeout=10)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    make_certs(directory)
    return directory


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, model_dir, certs):
    s = AdapterdServer(
        tmp_path_factory.mktemp("tls"),
        model_dir,
        ["--tls_cert_file", str(certs / "server.crt"), "--tls_key_file", str(certs / "server.key")],
    ).start()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture(scope="module")
def mtls_server(tmp_path_factory, model_dir, certs):
    s = AdapterdServer(
        tmp_path_factory.mktemp("mtls"),
        model_dir,
        [
            "--tls_cert_file", str(certs / "server.crt"),
            "--tls_key_file", str(certs / "server.key"),
            "--tls_client_ca_file", str(certs / "ca.crt"),
        ],
    ).start()
    yield s
    assert s.stop() == 0, s.log()


def test_tls_with_the_ca_as_a_path_or_bytes(tls_server, certs):
    ca = certs / "ca.crt"
    for root in (str(ca), ca, ca.read_bytes()):
        with adapterd.Client(tls_server.target, api_key="", root_certificates=root, **NO_RETRY) as c:
            assert c.health() == adapterd.ServingStatus.SERVING
            dataset = c.upload_dataset([{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}])
            assert dataset.dataset_id in [d.dataset_id for d in c.datasets()]
            c.delete_dataset(dataset.dataset_id)
    # The certificate names localhost too: server_name checks that name instead of the address.
    with adapterd.Client(tls_server.target, api_key="", root_certificates=ca, server_name="localhost", **NO_RETRY) as c:
        assert list(c.tasks()) == []


def test_tls_refusals_are_unavailable(tls_server, certs):
    # A plaintext client, a CA that did not sign the server's certificate, a name the certificate lacks,
    # and the system's roots (which do not hold the test CA): the handshake fails, nothing is sent.
    attempts: Dict[str, Dict[str, Any]] = {
        "plaintext": dict(),
        "another CA": dict(root_certificates=certs / "other-ca.crt"),
        "a wrong name": dict(root_certificates=certs / "ca.crt", server_name="not-the-server.example"),
        "the system's roots": dict(tls=True),
    }
    for what, kwargs in attempts.items():
        with adapterd.Client(tls_server.target, api_key="", **kwargs, **NO_RETRY) as c:
            with pytest.raises(adapterd.Unavailable):
                c.get_task("x")
                pytest.fail(f"{what}: the call went through")
    # The refused handshakes left the server serving.
    with adapterd.Client(tls_server.target, api_key="", root_certificates=certs / "ca.crt", **NO_RETRY) as c:
        assert c.health() == adapterd.ServingStatus.SERVING


def test_mutual_tls_needs_the_client_certificate(mtls_server, certs):
    ca = certs / "ca.crt"
    with adapterd.Client(
        mtls_server.target,
        api_key="",
        root_certificates=ca,
        certificate_chain=certs / "client.crt",
        private_key=(certs / "client.key").read_bytes(),
        **NO_RETRY,
    ) as c:
        assert c.health() == adapterd.ServingStatus.SERVING
        with pytest.raises(adapterd.NotFound):
            c.get_task("x")
    with adapterd.Client(mtls_server.target, api_key="", root_certificates=ca, **NO_RETRY) as anonymous:
        with pytest.raises(adapterd.Unavailable):
            anonymous.get_task("x")
    # A certificate the client CA did not sign: the server's own (signed by the same CA, but a server
    # certificate) is accepted by gRPC's default verifier, so use a key pair from the other CA instead.
    with adapterd.Client(
        mtls_server.target,
        api_key="",
        root_certificates=ca,
        certificate_chain=certs / "other-ca.crt",
        private_key=certs / "other-ca.key",
        **NO_RETRY,
    ) as stranger:
        with pytest.raises(adapterd.Unavailable):
            stranger.get_task("x")
