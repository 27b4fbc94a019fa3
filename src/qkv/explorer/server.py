"""Running the explorer's application with uvicorn: in the foreground (``qkv serve``), or in a
background thread on a free loopback port (a notebook, the tests, the load test)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    return host in LOOPBACK or host.startswith("127.")


def _config(app, host: str, port: int, log_level: str):
    import uvicorn

    # One worker process, one event loop; the models' locks keep each model to one thread.
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False)


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on ``host:port`` (``port`` 0: a free one); ``OSError`` names the
    address when it is taken or not this machine's."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    return sock


def serve(app, sock: socket.socket, *, log_level: str = "info") -> None:
    """Serve ``app`` on ``sock`` (from :func:`bind`) until interrupted (Ctrl-C)."""
    host, port = sock.getsockname()[:2]
    try:
        import uvicorn

        uvicorn.Server(_config(app, host, port, log_level)).run(sockets=[sock])
    finally:
        sock.close()


@contextmanager
def background_server(
    app, host: str = "127.0.0.1", *, log_level: str = "warning", timeout: float = 30.0
) -> Iterator[str]:
    """Serve ``app`` from a thread on a free port of ``host``; yields its base URL
    (``http://127.0.0.1:PORT/``) once it accepts connections, and stops it on exit."""
    import uvicorn

    sock = bind(host, 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(_config(app, host, port, log_level))
    # uvicorn (>= 0.29) installs its signal handlers only from the main thread: this one's are
    # left alone.
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the explorer did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
