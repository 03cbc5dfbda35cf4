"""OIDC bearer tokens on ``taskplug serve``, checked against a real issuer on 127.0.0.1: an HTTP server in the
test's thread publishing discovery and its JWKS, with keys made here and tokens signed by PyJWT. Nothing in
the verifier is replaced: it finds the keys by discovery, checks ``iss``, ``aud``, ``exp``/``nbf`` and the
signature with the key's own algorithm, and fetches the keys again for a ``kid`` it does not know."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi.testclient import TestClient

from service.test_api_replica_double import pod_spec
from taskplug.service import AuthSettings, OidcSettings
from taskplug.service._api_app import create_app
from taskplug.service._auth import OidcVerifier, Refused

AUDIENCE = "taskplug-api"


class Issuer:
    """An OpenID provider's public half on 127.0.0.1: discovery and JWKS, and the private keys to sign with."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.published: list[str] = []
        self.fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/keys"}
                elif self.path == "/keys":
                    issuer.fetches += 1
                    body = {"keys": [issuer.jwk(kid) for kid in issuer.published]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add_key(self, kid: str, kind: str = "rsa") -> None:
        key = (
            rsa.generate_private_key(65537, 2048)
            if kind == "rsa"
            else ec.generate_private_key(ec.SECP256R1())
        )
        self.keys[kid] = key
        self.published.append(kid)

    def jwk(self, kid: str) -> dict[str, Any]:
        key = self.keys[kid]
        algorithm = (
            jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
        )
        document: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
        return document | {"kid": kid, "use": "sig"}

    def token(self, kid: str = "k1", *, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "aud": AUDIENCE, "sub": "u-123", "iat": now, "exp": now + 300} | claims
        key = self.keys[kid]
        alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
        return jwt.encode(payload, key, algorithm=alg, headers={"kid": kid} | (headers or {}))

    def public_pem(self, kid: str) -> bytes:
        return bytes(
            self.keys[kid]
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    made = Issuer()
    made.add_key("k1")
    made.thread.start()
    try:
        yield made
    finally:
        made.server.shutdown()
        made.server.server_close()


def oidc_settings(issuer: Issuer, *, refresh_interval: float = 0.0) -> OidcSettings:
    """Keys fetched again for any unknown kid (unless told otherwise), roles from the ``roles`` claim."""
    return OidcSettings(issuer.url, AUDIENCE, role_claim="roles", refresh_interval=refresh_interval)


@pytest.fixture
def client(postgres_dsn: str, issuer: Issuer) -> Iterator[TestClient]:
    with TestClient(
        create_app(postgres_dsn, auth=AuthSettings(anonymous=None, oidc=oidc_settings(issuer)))
    ) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_token_of_the_issuer_submits_and_records_its_email(client: TestClient, issuer: Issuer) -> None:
    token = issuer.token(email="alice@example.com", roles=["submit"])

    created = client.post("/api/v1/executions", json={"spec": pod_spec("oidc")}, headers=bearer(token))

    assert created.status_code == 201, created.text
    assert created.json()["submitted_by"] == "oidc:alice@example.com"


def test_without_a_role_in_the_claim_a_user_only_reads(client: TestClient, issuer: Issuer) -> None:
    token = issuer.token()

    assert client.get("/api/v1/executions", headers=bearer(token)).status_code == 200
    refused = client.post("/api/v1/executions", json={"spec": pod_spec("oidc-r")}, headers=bearer(token))
    assert refused.status_code == 403
    assert "submit role" in refused.json()["error"]["message"] and "oidc:u-123" in refused.text


def test_an_ec_key_is_used_with_its_own_algorithm(client: TestClient, issuer: Issuer) -> None:
    issuer.add_key("ec1", "ec")

    assert client.get("/api/v1/executions", headers=bearer(issuer.token("ec1"))).status_code == 200


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "someone-else"},
        {"iss": "http://127.0.0.1:1/not-the-issuer"},
        {"exp": int(time.time()) - 3600},
        {"nbf": int(time.time()) + 3600},
        {"sub": None},
    ],
    ids=["audience", "issuer", "expired", "not-yet", "no-subject"],
)
def test_a_token_for_another_audience_issuer_or_time_is_401(
    client: TestClient, issuer: Issuer, claims: dict[str, Any]
) -> None:
    token = issuer.token(**{k: v for k, v in claims.items() if v is not None})
    if claims == {"sub": None}:
        payload = jwt.decode(token, options={"verify_signature": False})
        del payload["sub"]
        token = jwt.encode(payload, issuer.keys["k1"], algorithm="RS256", headers={"kid": "k1"})

    response = client.get("/api/v1/executions", headers=bearer(token))

    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_token_expired_within_the_leeway_still_passes(client: TestClient, issuer: Issuer) -> None:
    token = issuer.token(exp=int(time.time()) - 5)

    assert client.get("/api/v1/executions", headers=bearer(token)).status_code == 200


def test_unsigned_and_hmac_tokens_are_refused(client: TestClient, issuer: Issuer) -> None:
    claims = {
        "iss": issuer.url,
        "aud": AUDIENCE,
        "sub": "mallory",
        "exp": int(time.time()) + 300,
        "roles": "admin",
    }
    body = _b64(json.dumps(claims).encode())
    unsigned = f"{_b64(json.dumps({'alg': 'none', 'kid': 'k1'}).encode())}.{body}."
    # The classic confusion: HS256 "signed" with the issuer's public key as the HMAC secret.
    head = _b64(json.dumps({"alg": "HS256", "kid": "k1", "typ": "JWT"}).encode())
    mac = hmac.new(issuer.public_pem("k1"), f"{head}.{body}".encode(), hashlib.sha256).digest()
    confused = f"{head}.{body}.{_b64(mac)}"
    forged = issuer.token(roles="admin", sub="mallory")[:-4] + "AAAA"

    for token in (unsigned, confused, forged):
        response = client.post("/api/v1/executions", json={"spec": pod_spec("evil")}, headers=bearer(token))
        assert response.status_code == 401, (token, response.text)


def test_a_rotated_key_is_fetched_when_a_token_names_it(client: TestClient, issuer: Issuer) -> None:
    assert client.get("/api/v1/executions", headers=bearer(issuer.token())).status_code == 200
    issuer.add_key("k2")

    assert client.get("/api/v1/executions", headers=bearer(issuer.token("k2"))).status_code == 200


def test_unknown_key_ids_do_not_make_the_server_hammer_the_issuer(issuer: Issuer) -> None:
    now = [1000.0]
    verifier = OidcVerifier(oidc_settings(issuer, refresh_interval=10.0), clock=lambda: now[0])

    async def attempts() -> None:
        await verifier.verify(issuer.token())
        for n in range(5):
            with pytest.raises(Refused, match="no key"):
                await verifier.verify(issuer.token(headers={"kid": f"made-up-{n}"}))
        assert issuer.fetches == 1
        now[0] += 11  # past the refresh interval: the next unknown kid is looked up again
        issuer.add_key("k3")
        assert (await verifier.verify(issuer.token("k3")))["sub"] == "u-123"
        assert issuer.fetches == 2

    asyncio.run(attempts())
