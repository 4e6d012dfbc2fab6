"""serve --ray's ready line (server/ray/rayserve.replica_ready): it waits until /health/ready
through the proxy answers 200, as a plain serve prints its line once its own does; a stop ends the
wait. Against a small HTTP server on 127.0.0.1 that answers 503 (loading) until the test lets it
answer 200."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from omnivoice_cli.server.ray.rayserve import replica_ready


def loading_server():
    """(server, asked, loaded, statuses): /health/ready is 503 until `loaded` is set; `asked` is set
    once a 503 was sent."""
    asked, loaded, statuses = threading.Event(), threading.Event(), []

    class Health(BaseHTTPRequestHandler):
        def do_GET(self):
            status = 200 if loaded.is_set() and self.path == "/health/ready" else 503
            statuses.append(status)  # before the reply: the client may return the moment it reads it
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            if status == 503:
                asked.set()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, asked, loaded, statuses


def test_ready_only_once_a_replica_answers_200():
    server, asked, loaded, statuses = loading_server()
    result, stopped = [], threading.Event()
    port = server.server_address[1]
    try:
        waiter = threading.Thread(target=lambda: result.append(replica_ready(f"http://0.0.0.0:{port}", stopped)))
        waiter.start()
        assert asked.wait(60)
        assert not result  # a 503 (the model loading) is not ready
        loaded.set()
        waiter.join(60)
        assert result == [True] and statuses[-1] == 200 and 503 in statuses
    finally:
        stopped.set()
        server.shutdown()


def test_a_stop_ends_the_wait_without_ready():
    server, asked, _loaded, _statuses = loading_server()
    stopped = threading.Event()
    try:
        result = []
        waiter = threading.Thread(
            target=lambda: result.append(replica_ready(f"http://127.0.0.1:{server.server_address[1]}", stopped))
        )
        waiter.start()
        assert asked.wait(60)
        stopped.set()
        waiter.join(60)
        assert result == [False]
    finally:
        server.shutdown()
