"""The explorer's web application (FastAPI; ``qkv serve`` runs it with uvicorn).

Routes:

- ``GET /``: the page (:mod:`qkv.explorer.page`, served mode).
- ``GET /api/models``: ``{"models": [{name, kind, label, input, extras}], "limits": {...}}``;
  ``extras``: which of ``"neuron"`` and ``"rollout"`` the model's views can add (its runner's
  ``extras()``, decided without running it).
- ``POST /api/run``: JSON ``{"model": NAME, "text": STR}`` or ``{"model": NAME, "image":
  BASE64 (or a data: URL), "image_name": STR}``, with ``"max_new_tokens": INT`` for language
  models, and ``"neuron": BOOL`` (query and key vectors on the token views, for the page's
  neuron view) and ``"rollout": BOOL`` (an encoder's rollout and flow views, a ViT's flow map),
  both false by default, for a model whose ``extras`` names them (another answers 422); answers
  the model's output and attention (:mod:`qkv.explorer.views`).
- ``GET /api/health``: ``{"status": "ok", "models": N}``.

Every error is JSON ``{"error": MESSAGE}`` naming the problem: 404 an unknown model or route, 405 a
route's wrong method, 408 a body that has not all arrived within :data:`BODY_TIMEOUT` seconds (the
connection is then closed), 413 a body over the limit (by its Content-Length, or as it streams in),
415 a body not sent as ``application/json``, 421 a Host header that names none of the server's host
names, 422 a body that is not a JSON object of the shape above (not UTF-8, not JSON, nested too
deeply, a number too long to read, a lone surrogate in a string, a wrong or unknown field) or an
input that does not suit the model or the limits, 500 anything else, logged here and answered
without a traceback.

The Host check answers only the names the server is reached by on this machine (127.0.0.1,
localhost, ::1, any port) and those given to :func:`create_app`: a page of another site whose
domain is pointed at 127.0.0.1 (DNS rebinding) sends its own name and is refused. Starlette's
TrustedHostMiddleware decides (from Starlette 1.9 on, it reads a bracketed IPv6 Host and
compares names in lower case); :class:`HostCheck` answers its refusal as the 421 above. Requiring
``application/json`` makes a browser ask before it sends another site's request (a CORS
preflight, which this server never grants). Models are chosen when the app is made, never by a
path in a request; each runs under its own lock (:class:`qkv.explorer.session.ExplorerModel`),
and FastAPI runs the (blocking) handler in its thread pool, so requests to a busy model wait
their turn; what the input alone decides is checked before the lock.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qkv.explorer.page import page_data, render_page
from qkv.explorer.server import LOOPBACK
from qkv.explorer.session import ExplorerModels, ViewExtras
from qkv.explorer.views import InputError, Limits, check_unicode

log = logging.getLogger(__name__)
ROUTES = "GET /, GET /api/models, POST /api/run, GET /api/health"
# Seconds a request body may take to arrive whole (a JSON body of the largest image allowed
# takes well under one on any link the explorer is served over).
BODY_TIMEOUT = 10.0


class RunRequest(BaseModel):
    """The body of ``POST /api/run``; unknown fields are refused, and values are not coerced
    (``"12"`` is not a number, ``true`` not an integer)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str
    text: str | None = None
    image: str | None = None
    image_name: str = "image"
    max_new_tokens: int | None = None
    neuron: bool = False
    rollout: bool = False


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    # A message may quote the request (a model's name, a field's key, a Host header): a lone
    # surrogate there could not be written as UTF-8, so it is written as its escape.
    text = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"error": text}, status_code=status, headers=headers)


def _quoted(value: str, most: int = 60) -> str:
    """``value`` as repr, cut to about ``most`` characters (it comes from the request)."""
    return repr(value if len(value) <= most else value[:most] + "...")


def _served_name(host: str) -> str:
    """``host`` as one name to answer to: lower case, an IPv6 address without its brackets
    (``[::1]`` -> ``::1``). ``*`` is refused: TrustedHostMiddleware reads it as a wildcard."""
    name = host.strip().lower()
    name = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    if not name or any(c in name for c in "/@?#[] *") or name.count(":") == 1:
        raise ValueError(
            "a host name to answer to (--allow-host) is a name or address without a scheme, "
            f"port or path, such as explorer.lan or 192.168.1.5; got {host!r}"
        )
    return name


class HostCheck:
    """Starlette's :class:`TrustedHostMiddleware` over ``hosts`` (any port), whose refusal (a
    plain-text 400) is answered as the explorer's JSON 421 instead; a request it lets through
    goes on untouched."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        # As a Host header writes them (and TrustedHostMiddleware compares them): IPv6 in brackets.
        self.hosts = [f"[{h}]" if ":" in h else h for h in sorted({_served_name(h) for h in hosts})]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        trusted = False

        async def answer(scope: Scope, receive: Receive, _: Send) -> None:
            nonlocal trusted
            trusted = True
            await self.app(scope, receive, send)

        async def drop(_: Message) -> None:  # the middleware's own refusal, replaced below
            pass

        # Made per request, around this request's `answer` (its constructor only reads the names).
        check = TrustedHostMiddleware(answer, allowed_hosts=self.hosts, www_redirect=False)
        await check(scope, receive, drop)
        if trusted:
            return
        value = Headers(scope=scope).get("host")
        asked = "no Host header" if value is None else f"Host {_quoted(value)}"
        served = ", ".join(self.hosts)
        message = (
            f"this explorer does not answer to {asked}; address it as one of {served} (any "
            "port), or start it with --allow-host NAME to answer to another name"
        )
        await _error(421, message)(scope, receive, send)


class BodyLimit:
    """Read the whole request body before the application does, refusing (413) one over
    ``limit`` bytes: by its Content-Length, or, without one (chunked), as soon as it streams
    past the limit; and (408, closing the connection) one that has not all arrived within
    ``timeout`` seconds (uvicorn has no such timeout: a client that sends fewer bytes than its
    Content-Length would hold the request open forever)."""

    def __init__(self, app: ASGIApp, limit: int, timeout: float = BODY_TIMEOUT) -> None:
        self.app, self.limit, self.timeout = app, limit, timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        too_long = _error(413, f"the request body is over {self.limit:,} bytes")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await too_long(scope, receive, send)
            return
        chunks: list[bytes] = []
        seen = 0
        deadline = asyncio.get_running_loop().time() + self.timeout
        while True:
            try:  # a body shorter than its Content-Length would be waited for forever
                message = await asyncio.wait_for(
                    receive(), max(0.0, deadline - asyncio.get_running_loop().time())
                )
            except TimeoutError:
                late = f"the request body did not arrive within {self.timeout:g} s ({seen:,} "
                declared = f" of {int(length):,}" if length is not None else ""
                headers = {"connection": "close"}
                await _error(408, late + f"bytes{declared} came)", headers)(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                await too_long(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        whole: Message | None = {"type": "http.request", "body": b"".join(chunks)}

        async def replay() -> Message:
            nonlocal whole
            if whole is None:  # read already: what comes next is the client going away
                return await receive()
            message, whole = whole, None
            return message

        await self.app(scope, replay, send)


def _validation_message(errors: Iterable[Mapping[str, Any]]) -> str:
    parts = []
    for item in errors:
        loc = [_quoted(p, 40)[1:-1] for p in map(str, item.get("loc", ())) if p != "body"]
        parts.append(f"{'.'.join(loc) or 'body'}: {item.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


def parse_run_request(body: bytes, content_type: str | None) -> RunRequest:
    """The body of ``POST /api/run`` read as :class:`RunRequest`.

    Raises:
        HTTPException: 415 when it is not sent as JSON; 422 naming what is wrong with it.
    """
    media = (content_type or "").partition(";")[0].strip().lower()
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        shown = _quoted(media) if media else "none"
        raise HTTPException(
            415, f"send the body as JSON with content-type: application/json (got {shown})"
        )
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise HTTPException(
            422,
            f"the request body is not UTF-8 (byte 0x{body[error.start]:02x} at offset "
            f"{error.start}); send JSON encoded as UTF-8",
        ) from None
    except json.JSONDecodeError as error:
        raise HTTPException(
            422,
            f"the request body is not valid JSON ({error.msg} at line {error.lineno}, column "
            f"{error.colno})",
        ) from None
    except RecursionError:
        raise HTTPException(
            422, "the request body is nested too deeply to read; send one flat JSON object"
        ) from None
    except ValueError:  # an integer over Python's limit on digits (4,300 by default)
        digits = sys.get_int_max_str_digits()
        raise HTTPException(
            422, f"the request body has an integer of over {digits:,} digits; no field takes one"
        ) from None
    try:
        for key, value in data.items() if isinstance(data, dict) else ():
            check_unicode(key, "a field's name")
            if isinstance(value, str):
                check_unicode(value, key if key in RunRequest.model_fields else "a field")
        return RunRequest.model_validate(data)
    except InputError as error:
        raise HTTPException(422, str(error)) from None
    except ValidationError as error:
        raise HTTPException(422, _validation_message(error.errors())) from None


async def _body(request: Request) -> tuple[bytes, str | None]:
    # Read here, in the event loop; parsed by the handler, in the thread pool.
    return await request.body(), request.headers.get("content-type")


def _decode_base64(text: str, limits: Limits) -> bytes:
    if text.startswith("data:"):
        head, _, text = text.partition(",")
        if ";base64" not in head:
            raise InputError("image must be base64 (a data: URL with ;base64, or plain base64)")
    if len(text) > limits.max_image_bytes * 4 // 3 + 8:
        raise InputError(f"the image is over {limits.max_image_bytes:,} bytes")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("image is not valid base64") from None


def create_app(
    models: ExplorerModels,
    limits: Limits | None = None,
    *,
    hosts: Iterable[str] = (),
    body_timeout: float = BODY_TIMEOUT,
) -> FastAPI:
    """The explorer's application over ``models`` (loaded beforehand), refusing inputs over
    ``limits``; it answers requests whose Host header names a loopback address (127.0.0.1,
    localhost, ::1) or one of ``hosts``, on any port."""
    limits = limits or Limits()
    hosts = [*LOOPBACK, *hosts]
    for host in hosts:
        _served_name(host)  # a bad name is refused now, not at the first request
    app = FastAPI(title="qkv attention explorer", docs_url=None, redoc_url=None, openapi_url=None)
    page = render_page(page_data("served", models.describe(), limits))

    @app.exception_handler(HTTPException)
    async def refused(request: Request, error: HTTPException) -> JSONResponse:
        message = str(error.detail)
        if error.status_code in (404, 405) and message in ("Not Found", "Method Not Allowed"):
            where = _quoted(f"{request.method} {request.url.path}")
            message = f"no route {where}; the explorer serves {ROUTES}"
        return _error(error.status_code, message, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_message(error.errors()))

    @app.exception_handler(Exception)
    async def crashed(request: Request, error: Exception) -> JSONResponse:
        log.exception("error answering %s %s", request.method, request.url.path)
        return _error(500, f"internal error ({type(error).__name__}); see the server's log")

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/api/models")
    def list_models() -> dict[str, Any]:
        return {"models": models.describe(), "limits": asdict(limits)}

    @app.get("/api/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "models": len(models)}

    @app.post("/api/run")
    def run(body: tuple[bytes, str | None] = Depends(_body)) -> JSONResponse:
        request = parse_run_request(*body)
        try:
            model = models[request.model]
        except KeyError as error:
            return _error(404, str(error.args[0]))
        try:
            image = None if request.image is None else _decode_base64(request.image, limits)
            result = model.run(
                text=request.text,
                image=image,
                image_name=request.image_name[:200] or "image",
                max_new_tokens=request.max_new_tokens,
                limits=limits,
                extras=ViewExtras(neuron=request.neuron, rollout=request.rollout),
            )
        except InputError as error:
            return _error(422, str(error))
        return JSONResponse(result)

    # A body holds at most one image (base64: 4/3 of its bytes) and a text, plus JSON.
    body_limit = limits.max_image_bytes * 4 // 3 + limits.max_chars * 6 + 65_536
    app.add_middleware(BodyLimit, limit=body_limit, timeout=body_timeout)
    app.add_middleware(HostCheck, hosts=hosts)  # outermost: checked first
    return app
