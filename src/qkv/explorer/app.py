"""The explorer's web application (FastAPI; ``qkv serve`` runs it with uvicorn).

Routes:

- ``GET /``: the page (:mod:`qkv.explorer.page`, served mode).
- ``GET /api/models``: ``{"models": [{name, kind, label, input}], "limits": {...}}``.
- ``POST /api/run``: JSON ``{"model": NAME, "text": STR}`` or ``{"model": NAME, "image":
  BASE64 (or a data: URL), "image_name": STR}``, with ``"max_new_tokens": INT`` for language
  models; answers the model's output and attention (:mod:`qkv.explorer.views`).
- ``GET /api/health``: ``{"status": "ok", "models": N}``.

Errors are JSON ``{"error": MESSAGE}`` naming the problem: 404 an unknown model, 413 a body over
the limit, 422 an input that does not suit the model or the limits (or is not valid JSON of the
shape above), 500 anything else, logged here and answered without a traceback. Models are chosen
when the app is made, never by a path in a request; each runs under its own lock
(:class:`qkv.explorer.session.ExplorerModel`), and FastAPI runs the (blocking) handler in its
thread pool, so requests to a busy model wait their turn.
"""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qkv.explorer.page import page_data, render_page
from qkv.explorer.session import ExplorerModels
from qkv.explorer.views import InputError, Limits

log = logging.getLogger(__name__)


class RunRequest(BaseModel):
    """The body of ``POST /api/run``; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    model: str
    text: str | None = None
    image: str | None = None
    image_name: str = "image"
    max_new_tokens: int | None = None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class BodyLimit:
    """Refuse (413) a request body over ``limit`` bytes, by its Content-Length or, without
    one, while it streams in, before the application reads it whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        too_long = _error(413, f"the request body is over {self.limit:,} bytes")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await too_long(scope, receive, send)
            return
        seen = 0
        refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    refused = True
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _BodyTooLarge:
            if refused:
                await too_long(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


def _validation_message(error: RequestValidationError) -> str:
    parts = []
    for item in error.errors():
        if item.get("type") == "json_invalid":
            return "the request body is not valid JSON"
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


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


def create_app(models: ExplorerModels, limits: Limits | None = None) -> FastAPI:
    """The explorer's application over ``models`` (loaded beforehand), refusing inputs over
    ``limits``."""
    limits = limits or Limits()
    app = FastAPI(title="qkv attention explorer", docs_url=None, redoc_url=None, openapi_url=None)
    page = render_page(page_data("served", models.describe(), limits))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_message(error))

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
    def run(request: RunRequest) -> JSONResponse:
        try:
            model = models[request.model]
        except KeyError as error:
            return _error(404, str(error.args[0]))
        try:
            image = None if request.image is None else _decode_base64(request.image, limits)
            result = model.run(
                text=request.text,
                image=image,
                image_name=request.image_name[:200],
                max_new_tokens=request.max_new_tokens,
                limits=limits,
            )
        except InputError as error:
            return _error(422, str(error))
        return JSONResponse(result)

    # A body holds at most one image (base64: 4/3 of its bytes) and a text, plus JSON.
    body_limit = limits.max_image_bytes * 4 // 3 + limits.max_chars * 6 + 65_536
    app.add_middleware(BodyLimit, limit=body_limit)
    return app
