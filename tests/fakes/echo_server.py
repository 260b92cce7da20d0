"""A hostile server on 127.0.0.1 that answers every request with one status and echoes the request's headers in its
error text, header and body, as some servers and proxies do: it stands where a user may point any of our clients
(an OpenAI-protocol base URL, HF_ENDPOINT, LABEL_STUDIO_URL), to show that no secret we send comes back into a
message or a file. `cut` echoes only the first characters of each header value (a server that truncates)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EchoServer:
    def __init__(self, status: int = 500, cut: int | None = None) -> None:
        self.status, self.cut = status, cut
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                server.requests += 1
                echoed = {name: value[: server.cut] if server.cut else value for name, value in self.headers.items()}
                text = f"rejected; you sent {echoed}"
                body = json.dumps(
                    {"error": {"message": text, "type": "echo", "code": server.status}, "detail": text}
                ).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Error-Message", text.encode("ascii", "replace").decode()[:4000])
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _answer

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="echo-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> EchoServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
