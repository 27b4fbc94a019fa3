"""A stop asked for by a signal: SIGINT or SIGTERM ends a run after its current step, with a
checkpoint, instead of killing it mid-write."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

logger = logging.getLogger(__name__)


class SignalFlag:
    """While active, SIGINT and SIGTERM set :attr:`received` instead of killing the process; a
    second SIGINT raises ``KeyboardInterrupt`` as usual. The previous handlers come back on
    exit. Handlers can only be installed from the main thread; elsewhere (and when not
    ``enabled``) signals keep their usual effect."""

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalFlag:
        if self.enabled and threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                number = getattr(signal, name)
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def _handle(self, number: int, frame: Any) -> None:
        if self.received is not None and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(number).name
        logger.warning("%s received: stopping after this step", self.received)
