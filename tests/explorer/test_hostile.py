"""Hostile input to the explorer's API gets a clean, documented error: lone surrogates, a
chunked body over the limit, JSON nested too deeply, integers too long to read, bytes that are
not UTF-8, a Host header naming another site (DNS rebinding), a text over the token limit
(refused before the model's lock, the model never run); and a fuzz test of the whole API: no
body answers 500, and every error is ``{"error": MESSAGE}`` with a documented status."""

from __future__ import annotations

import json
import re
import threading

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
pytest.importorskip("sklearn")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from qkv.explorer.app import create_app  # noqa: E402
from qkv.explorer.server import background_server  # noqa: E402
from qkv.explorer.session import ExplorerModels  # noqa: E402
from qkv.explorer.views import Limits  # noqa: E402
from tests.explorer.test_api import BASE_URL, b64, digit_png  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
JSON = {"content-type": "application/json"}
LIMITS = Limits(max_chars=200, max_image_bytes=20_000, max_image_side=256, max_new_tokens=30)
STATUSES = {404, 405, 413, 415, 421, 422}  # the README's errors, but 500 (an internal error)
TEXT_MODELS = ("reverse", "kjv-char", "classification", "tagging")


@pytest.fixture(scope="module")
def models(explorer_dirs):
    return ExplorerModels.load(list(explorer_dirs.values()))


@pytest.fixture(scope="module")
def client(models):
    # A crash in the app is raised here, with its traceback, rather than answered 500.
    return TestClient(create_app(models, LIMITS), base_url=BASE_URL)


def error_of(reply, status: int) -> str:
    """The message of a documented error: ``status``, JSON ``{"error": MESSAGE}`` and no more."""
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in body["error"]
    return body["error"]


def post_raw(client, body: bytes, headers=JSON):
    return client.post("api/run", content=body, headers=headers)


# ------------------------------------------------------------------- lone surrogates


@pytest.mark.parametrize(
    "body, message",
    [
        ({"model": "reverse", "text": "a \ud800 b"}, "text has a lone surrogate (U+D800 at "
         "character 2)"),
        ({"model": "classification", "text": "\udfffthe film"}, "(U+DFFF at character 0)"),
        ({"model": "tagging", "text": "to walk \udbff"}, "(U+DBFF at character 8)"),
        ({"model": "kjv-char", "text": "And\ud800"}, "text has a lone surrogate"),
        ({"model": "vit-digits", "image": "IMAGE", "image_name": "x\ud800.png"},
         "image_name has a lone surrogate (U+D800 at character 1)"),
        ({"model": "caption-digits", "image": "IMAGE", "image_name": "\udc80"},
         "image_name has a lone surrogate"),
        ({"model": "rev\ud800erse", "text": "a"}, "model has a lone surrogate"),
        ({"model": "reverse", "text": "a", "\ud800": 1}, "a field's name has a lone surrogate"),
    ],
)  # fmt: skip
def test_lone_surrogates_are_refused_with_a_message(client, body, message):
    if body.get("image") == "IMAGE":
        body = {**body, "image": b64(digit_png(1))}
    sent = json.dumps(body).encode("ascii")  # the surrogate as its escape, "\ud800"
    assert b"\\ud" in sent
    error = error_of(post_raw(client, sent), 422)
    assert message in error and "valid Unicode" in error


def test_a_surrogate_pair_is_text(client):
    # "\ud83d\ude00" in JSON is one character (U+1F600), not two lone surrogates.
    sent = json.dumps({"model": "reverse", "text": "a \U0001f600 b"}).encode("ascii")
    assert b"\\ud83d\\ude00" in sent
    reply = post_raw(client, sent)
    assert reply.status_code == 200, reply.text
    assert reply.json()["input"]["text"] == "a \U0001f600 b"


def test_the_library_refuses_surrogates_too(models):
    # What `qkv explore` reads from a command line it cannot decode (surrogateescape).
    with pytest.raises(ValueError, match=r"the text has a lone surrogate \(U\+DCFF"):
        models["reverse"].run(text="caf\udcff", limits=LIMITS)


# -------------------------------------------------------- bodies the JSON reader refuses


def test_a_chunked_body_over_the_limit_is_413(client):
    def chunks():  # no Content-Length: the body streams in until the limit is passed
        for _ in range(40):
            yield b" " * 10_000

    error = error_of(post_raw(client, chunks()), 413)
    assert re.fullmatch(r"the request body is over [\d,]+ bytes", error)
    assert client.get("api/health").status_code == 200


def test_a_chunked_body_over_the_limit_is_413_from_a_real_server(models):
    def chunks():
        yield b'{"model": "reverse", "text": "'
        for _ in range(40):
            yield b"a " * 5_000

    with background_server(create_app(models, LIMITS)) as url:
        reply = httpx.post(url + "api/run", content=chunks(), headers=JSON, timeout=30)
        assert "content-length" not in reply.request.headers
        assert "request body is over" in error_of(reply, 413)
        # Under the limit, chunked is fine.
        small = iter([b'{"model": "reverse", ', b'"text": "a b c"}'])
        reply = httpx.post(url + "api/run", content=small, headers=JSON, timeout=30)
        assert reply.status_code == 200, reply.text


@pytest.mark.parametrize(
    "body, message",
    [
        (b'{"model": "reverse", "text": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
         "nested too deeply to read"),
        (b"[" * 30_000, "nested too deeply to read"),
        (b'{"model": "kjv-char", "text": "a", "max_new_tokens": ' + b"9" * 5_000 + b"}",
         "an integer of over 4,300 digits"),
        (b'{"model": "reverse", "text": "caf\xe9"}',
         "not UTF-8 (byte 0xe9 at offset 33); send JSON encoded as UTF-8"),
        (b'{"model": "reverse", "text": "\xed\xa0\x80"}', "not UTF-8 (byte 0xed at offset 30)"),
        (b"\xff\xfe{\x00}\x00", "not UTF-8 (byte 0xff at offset 0)"),
        (b"", "not valid JSON (Expecting value at line 1, column 1)"),
        (b'{"model": "reverse", "text": "a"} x', "not valid JSON (Extra data"),
        (b"[]", "invalid request: body: Input should be a valid dictionary"),
        (b'{"model": "kjv-char", "text": "a", "max_new_tokens": true}',
         "max_new_tokens: Input should be a valid integer"),
        (b'{"model": "kjv-char", "text": "a", "max_new_tokens": "12"}',
         "max_new_tokens: Input should be a valid integer"),
        (b'{"model": "kjv-char", "text": "a", "max_new_tokens": 1' + b"0" * 4000 + b"}",
         "max_new_tokens must be between 0 and 30"),
    ],
    ids=["nested-text", "nested-body", "long-integer", "latin-1", "utf-8-surrogate", "utf-16",
         "empty", "extra-data", "a-list", "true", "a-string", "huge-integer"],
)  # fmt: skip
def test_unreadable_bodies_get_the_documented_shape(client, body, message):
    assert message in error_of(post_raw(client, body), 422)


@pytest.mark.parametrize(
    "headers, shown",
    [({"content-type": "text/plain"}, "'text/plain'"), ({}, "none"),
     ({"content-type": "application/x-www-form-urlencoded"}, "'application/x-www-form")],
)  # fmt: skip
def test_a_body_not_sent_as_json_is_415(client, headers, shown):
    # Sent without a preflight by any page in a browser: refused, though it holds JSON.
    body = json.dumps({"model": "reverse", "text": "a b"}).encode()
    error = error_of(client.post("api/run", content=body, headers=headers), 415)
    assert "content-type: application/json" in error and shown in error
    reply = post_raw(client, body, {"content-type": "application/json; charset=utf-8"})
    assert reply.status_code == 200, reply.text


def test_routes_and_methods_not_served_get_the_documented_shape(client):
    assert "no route 'GET /api/nope'" in error_of(client.get("api/nope"), 404)
    error = error_of(client.get("api/run"), 405)
    assert "no route 'GET /api/run'" in error and "POST /api/run" in error


# ------------------------------------------------------------------------ Host header


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:8000", "localhost", "LocalHost:1", "[::1]", "[::1]:8000"]
)
def test_loopback_hosts_are_answered(client, host):
    assert client.get("api/health", headers={"host": host}).status_code == 200


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.nip.io",
     "::1", "localhost:80x", "[::1", "", "explorer.lan"],
)  # fmt: skip
def test_other_hosts_are_refused(client, host):
    body = {"model": "reverse", "text": "a b"}
    error = error_of(client.post("api/run", json=body, headers={"host": host}), 421)
    assert f"does not answer to Host {host!r}" in error
    assert "127.0.0.1, [::1], localhost" in error and "--allow-host NAME" in error


def test_hosts_given_are_answered_too(models):
    client = TestClient(create_app(models, LIMITS, hosts=["explorer.lan", "[fd00::5]"]))
    for host in ("explorer.lan", "EXPLORER.LAN:8000", "[fd00::5]:80", "localhost"):
        assert client.get("api/health", headers={"host": host}).status_code == 200, host
    error = error_of(client.get("api/health", headers={"host": "evil.example"}), 421)
    assert "127.0.0.1, [::1], explorer.lan, [fd00::5], localhost" in error


@pytest.mark.parametrize("host", ["explorer.lan:8000", "http://explorer.lan", "", "a b", "[::1"])
def test_a_host_name_with_a_port_or_scheme_is_refused_at_start(models, host):
    named = r"without a scheme, port or path.*got " + re.escape(repr(host))
    with pytest.raises(ValueError, match=named):
        create_app(models, LIMITS, hosts=[host])


@pytest.mark.parametrize("host", ["*", "*.lan"])
def test_a_wildcard_is_refused_at_start(models, host):
    # TrustedHostMiddleware, which makes the check, would read these as patterns, "*" as any host.
    with pytest.raises(ValueError, match=r"got " + re.escape(repr(host))):
        create_app(models, LIMITS, hosts=[host])


def test_a_rebound_name_is_refused_by_a_real_server(models):
    # DNS rebinding: the browser connects to 127.0.0.1 but names the attacker's domain.
    with background_server(create_app(models, LIMITS)) as url:
        port = url.rstrip("/").rsplit(":", 1)[1]
        reply = httpx.get(url + "api/models", headers={"host": f"evil.example:{port}"})
        assert "does not answer to Host 'evil.example:" in error_of(reply, 421)
        assert httpx.get(url + "api/models").status_code == 200  # Host: 127.0.0.1:PORT


# ----------------------------------------------- token limits checked before the lock


class SpyLock:
    """A model's lock that counts how often it is taken."""

    def __init__(self) -> None:
        self.lock, self.taken = threading.Lock(), 0

    def __enter__(self) -> None:
        self.lock.acquire()
        self.taken += 1

    def __exit__(self, *exc) -> None:
        self.lock.release()


# What each text model runs under its lock.
RUNS = {"reverse": ("attentions", "translate"), "kjv-char": ("generate", "attention"),
        "classification": ("attention", "predict"), "tagging": ("attention", "tag")}  # fmt: skip


@pytest.fixture
def spied(models, monkeypatch):
    """A client with a 20-token limit over the models, the text models' locks spied and their
    runs counted: ``(client, locks, runs)``, ``runs[name]`` the calls of its model."""
    locks, runs = {}, dict.fromkeys(RUNS, 0)

    def counting(run, name):
        def counted(*args, **kwargs):
            runs[name] += 1
            return run(*args, **kwargs)

        return counted

    for name, methods in RUNS.items():
        model = models[name]
        locks[name] = SpyLock()
        monkeypatch.setattr(model, "lock", locks[name])
        for method in methods:
            monkeypatch.setattr(model.runner, method, counting(getattr(model.runner, method), name))
    limits = Limits(max_chars=1000, max_tokens=20, max_new_tokens=30)
    return TestClient(create_app(models, limits), base_url=BASE_URL), locks, runs


@pytest.mark.parametrize(
    "model, body, count, message",
    [
        ("reverse", {"text": "a b c d " * 10}, None, "; the explorer shows at most 20"),
        ("kjv-char", {"text": "And God said " * 3}, 39, "the prompt has 39 tokens; the "
         "explorer shows at most 20"),
        ("kjv-char", {"text": "And God said", "max_new_tokens": 9}, None, "the prompt has 12 "
         "tokens and max_new_tokens is 9: 21 tokens, but the explorer shows at most 20; ask "
         "for at most 8 new tokens"),
        ("kjv-char", {"text": "And God said", "max_new_tokens": 31}, None,
         "max_new_tokens must be between 0 and 30, got 31"),
        ("kjv-char", {"text": "And God\u2603"}, None, "outside this model's vocabulary"),
        ("classification", {"text": "the film was superb " * 10}, 32, "the text has 32 tokens; "
         "the explorer shows at most 20"),
        ("tagging", {"text": "to walk 7 . " * 6}, None, "tokens; the explorer shows at most 20"),
    ],
)  # fmt: skip
def test_an_input_over_the_token_limit_never_takes_the_lock(
    spied, models, model, body, count, message
):
    client, locks, runs = spied
    error = error_of(client.post("api/run", json={"model": model, **body}), 422)
    assert message in error
    if model == "reverse":  # the source tokenizer's count, with the end-of-sentence token
        count = len(models["reverse"].runner.source_tokenizer.encode(body["text"])) + 1
    if count is not None:
        assert re.search(rf"has {count} tokens", error), error
    found = re.search(r"has (\d+) tokens;", error)
    assert found is None or int(found.group(1)) > 20
    assert all(lock.taken == 0 for lock in locks.values())
    assert all(n == 0 for n in runs.values())  # no model ran


def test_a_valid_input_takes_the_lock_and_a_default_continuation_fits(spied):
    client, locks, runs = spied
    reply = client.post("api/run", json={"model": "kjv-char", "text": "And God said unto"})
    assert reply.status_code == 200, reply.text  # 17 tokens, and what fits of the default 30
    (view,) = reply.json()["views"]
    assert len(view["queries"]) <= 20
    assert locks["kjv-char"].taken == 1 and runs["kjv-char"] >= 1
    assert locks["reverse"].taken == runs["reverse"] == 0


# ---------------------------------------------------------------------------- fuzzing

any_text = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=40)
model_text = st.text(st.sampled_from("abcd ."), max_size=40) | st.text(
    st.sampled_from("abcd .\u2603\ud800\U0001f600\x00\n"), max_size=250
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)
MODEL_NAMES = (*TEXT_MODELS, "vit-digits", "caption-digits")
images = st.sampled_from([b64(digit_png(2)), "data:image/png;base64," + b64(digit_png(4, 5)),
                          b64(b"GIF89a"), "data:image/png,x", "%%%"])  # fmt: skip
# Bodies near valid ones (a model's own kind of input, odd values), and any mixture of fields.
text_bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(TEXT_MODELS), "text": model_text},
    optional={"max_new_tokens": st.integers(0, 30)},
)
image_bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(["vit-digits", "caption-digits"]), "image": images},
    optional={"image_name": st.text(max_size=300)},
)
mixed_bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(MODEL_NAMES) | any_text},
    optional={
        "text": model_text | json_values,
        "image": images | json_values,
        "image_name": any_text | json_values,
        "max_new_tokens": st.integers(-5, 40) | json_values,
        "path": json_values,
    },
)
run_bodies = text_bodies | image_bodies | mixed_bodies


def encoded(body, how: str) -> bytes:
    if how == "ascii":  # a surrogate as its escape
        return json.dumps(body).encode("ascii")
    # Raw UTF-8; a surrogate as the three bytes UTF-8 refuses.
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


def check_answer(reply) -> None:
    """A documented answer: 200 with a result, or a documented error status and shape."""
    event(f"status {reply.status_code}")
    if reply.status_code == 200:
        assert {"model", "kind", "input", "output", "views"} <= set(reply.json())
    else:
        assert reply.status_code in STATUSES, reply.text
        error_of(reply, reply.status_code)


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(body=run_bodies, how=st.sampled_from(["ascii", "utf-8"]))
def test_fuzz_run_bodies(client, body, how):
    check_answer(post_raw(client, encoded(body, how)))


@FUZZ
@given(
    body=json_values.map(lambda v: encoded(v, "ascii")) | st.binary(max_size=64),
    content_type=st.sampled_from(["application/json", "application/ld+json", "text/plain", None]),
    host=st.sampled_from(["localhost", "127.0.0.1:8000", "[::1]", "evil.example", "::1"]),
    path=st.sampled_from(["api/run", "api/models", "api/health", "api/nope", ""]),
)
def test_fuzz_any_request(client, body, content_type, host, path):
    headers = {"host": host} | ({"content-type": content_type} if content_type else {})
    reply = client.post(path, content=body, headers=headers)
    if host in ("evil.example", "::1"):
        assert reply.status_code == 421
    check_answer(reply)
    assert client.get("api/health").json()["status"] == "ok"
