"""A tiny stand-in for the Hugging Face hub on localhost (the few endpoints huggingface_hub calls
to download a snapshot), so that hub.download_checkpoint can be tried against the real huggingface_hub.

    python tests/local_hub.py  ->  runs hub.download_checkpoint against it and prints a JSON report

HF_ENDPOINT is read by huggingface_hub when it is imported, so this runs in its own process.
"""

import hashlib
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

REPO = "k2-fsa/OmniVoice"
COMMIT = "c" * 40
FILES = {
    "config.json": json.dumps({"model_type": "omnivoice"}).encode(),
    "model.safetensors": bytes(range(256)) * 4000,
    "tokenizer.json": b"{}",
    "audio_tokenizer/config.json": b'{"codec": 1}',
    "audio_tokenizer/model.safetensors": bytes(range(256)) * 1000,
    "README.md": b"# card",
}


class Handler(BaseHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *args):
        pass

    def _send(self, code: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(body)

    def do_GET(self):
        path = urlparse(self.path).path
        type(self).requests.append(path)
        api, resolve = f"/api/models/{REPO}/", f"/{REPO}/resolve/"
        if path.startswith(api + "revision/"):
            info = {"id": REPO, "sha": COMMIT, "siblings": [{"rfilename": f} for f in FILES]}
            return self._send(200, json.dumps(info).encode())
        if path.startswith(api + "tree/"):
            tree = [
                {"type": "file", "oid": hashlib.sha1(c).hexdigest(), "size": len(c), "path": f}
                for f, c in FILES.items()
            ]
            return self._send(200, json.dumps(tree).encode())
        name = path[len(resolve) :].partition("/")[2] if path.startswith(resolve) else None
        if name in FILES:
            etag = '"%s"' % hashlib.sha1(FILES[name]).hexdigest()
            return self._send(200, FILES[name], {"X-Repo-Commit": COMMIT, "ETag": etag})
        return self._send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"})

    do_HEAD = do_GET


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp()
    os.environ.update(HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}", HF_HUB_CACHE=f"{tmp}/hub")
    os.environ.update(OMNIVOICE_HOME=f"{tmp}/home", HF_HUB_DISABLE_TELEMETRY="1")
    os.environ.pop("HF_HUB_OFFLINE", None)
    from omnivoice_cli.engine.checkpoint import hub
    from omnivoice_cli.engine.errors import ModelUnavailable

    report: dict = {"notices": [], "progress": []}
    path = hub.download_checkpoint(
        REPO, on_progress=lambda d, t: report["progress"].append([d, t]), on_notice=report["notices"].append
    )
    report["files_equal"] = all((path / f).read_bytes() == c for f, c in FILES.items())
    report["marker"] = os.path.exists(f"{tmp}/home/licence-notice-shown")
    asked = len(Handler.requests)
    os.environ["HF_HUB_OFFLINE"] = "1"
    report["cached_offline"] = str(hub.download_checkpoint(REPO)) == str(path)
    del os.environ["HF_HUB_OFFLINE"]
    report["cached_online"] = str(hub.download_checkpoint(REPO)) == str(path)
    report["requests_when_cached"] = len(Handler.requests) - asked
    report["models"] = [[m.repo_id, m.size_bytes, m.complete] for m in hub.cached_models()]
    try:
        hub.download_checkpoint("owner/gone")
    except ModelUnavailable as e:
        report["gone"] = str(e)
    server.shutdown()
    server.server_close()
    os.environ["HF_HUB_CACHE"] = f"{tmp}/other"
    try:
        hub.download_checkpoint(REPO)
    except ModelUnavailable as e:
        report["down"] = str(e)
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
