"""A small real HTTP server on 127.0.0.1, in threads of its own, for tests that need a server
other than the emulator: ``serving(handler)`` runs one for the length of a ``with`` block;
``QuietHandler`` is a request handler that logs nothing and answers with ``reply``."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator


class QuietHandler(http.server.BaseHTTPRequestHandler):
    def reply(self, body: bytes, content_type: str) -> None:
        """A 200 answer carrying ``body``."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(
    handler: type[http.server.BaseHTTPRequestHandler],
) -> Iterator[http.server.ThreadingHTTPServer]:
    """A server of ``handler`` on a free port (``server.server_address[1]``), stopped on exit."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
