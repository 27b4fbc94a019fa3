"""Issue 34 in the explorer, on the trained runs of ``tests/fixtures/runs`` (read only): a
``"text": null`` is named as such (not "not an image"), and a body shorter than its
Content-Length is answered 408 within the server's body timeout instead of held forever."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient

from qkv.explorer.app import create_app
from qkv.explorer.server import background_server
from qkv.explorer.session import ExplorerModels
from tests.explorer.test_api import BASE_URL
from tests.explorer.test_hostile import error_of

pytestmark = pytest.mark.usefixtures("one_thread")
RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


@pytest.fixture(scope="module")
def models():
    return ExplorerModels.load([RUNS / "translation", RUNS / "image_classification"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "translation", "text": None}, '"text" must be a string, got none (null)'),
        ({"model": "translation"}, '"text" must be a string, got none'),
        ({"model": "translation", "image": "AAAA"}, 'takes text (in "text"), not an image'),
        ({"model": "image_classification", "image": None}, '"image" must be a base64 string'),
        ({"model": "image_classification", "text": "a"}, "takes an image (base64 in"),
    ],
)
def test_a_missing_or_null_input_is_named_as_such(models, body, message):
    client = TestClient(create_app(models), base_url=BASE_URL)
    assert message in error_of(client.post("api/run", json=body), 422)


def test_a_body_shorter_than_its_content_length_is_answered_408_and_closed(models):
    """uvicorn has no timeout on a request body: without the app's own, this request was held
    open for as long as the client liked. The server's timeout is 2 s; the test waits up to
    30 s for the answer (a bound on hanging, not on speed)."""
    with background_server(create_app(models, body_timeout=2.0)) as url:
        address = urlsplit(url)
        with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
            sock.sendall(
                b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                b'{"model": '
            )
            reply = b""
            while chunk := sock.recv(65536):  # until the server closes the connection
                reply += chunk
    status, _, rest = reply.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout", reply
    assert b"connection: close" in rest.lower()
    assert b"did not arrive within 2 s (10 bytes of 100 came)" in rest
