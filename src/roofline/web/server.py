"""How `roofline serve` (web.app.serve) runs the workshop with uvicorn: its socket, and the settings
that keep every connection answered: a deadline on reading a request's head, idle kept-alive
connections held longer than HTTP clients keep theirs, and a bound on connections at once.
"""

from __future__ import annotations

from roofline.errors import RooflineError

REQUEST_READ_TIMEOUT_S = 10.0  # a connection must finish sending a request's head within this
MAX_CONNECTIONS = 1024  # uvicorn answers 503 past this many connections and tasks at once
# An idle kept-alive connection is closed after this. A client that sends on a connection at the
# moment the server closes it gets no answer, so the server waits longer than clients keep idle
# connections (httpx 5 s, aiohttp 15 s) and they close first; 75 s is nginx's default. uvicorn's 5 s
# raced httpx's 5 s.
KEEP_ALIVE_S = 75.0
LISTEN_BACKLOG = 2048  # connections the kernel holds before the server accepts them


def listen(host: str, port: int):
    """A TCP socket bound to ``host``:``port`` and listening: a port in use or a host that does not
    resolve is a RooflineError naming the flag, before anything is printed."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise RooflineError(f"--host {host!r}: cannot resolve it ({getattr(exc, 'strerror', None) or exc})",
                            field="host") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: no wait after a restart
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise RooflineError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror or exc})",
                            field="port") from None
    return sock


def timed_protocol():
    """uvicorn's h11 protocol with a deadline on reading a request: a connection that has not sent a
    whole request head REQUEST_READ_TIMEOUT_S after it opened (or after the first bytes of its next
    request, for a kept-alive one) is closed. uvicorn alone waits on a half-sent request for ever."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _read_deadline = None

        def _awaiting_request(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._read_deadline is None:
                self._read_deadline = self.loop.call_later(REQUEST_READ_TIMEOUT_S, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _read_timed_out(self) -> None:
            self._read_deadline = None
            if self._awaiting_request() and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._awaiting_request():
                self._arm()
            super().data_received(data)
            if not self._awaiting_request():  # a whole request head arrived: the app has it now
                self._disarm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

    return TimedH11Protocol


def uvicorn_config(app, host: str, port: int):
    """The uvicorn.Config `roofline serve` runs: the timed protocol, KEEP_ALIVE_S, MAX_CONNECTIONS."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="warning", http=timed_protocol(),
                          limit_concurrency=MAX_CONNECTIONS, timeout_keep_alive=KEEP_ALIVE_S, backlog=LISTEN_BACKLOG)
