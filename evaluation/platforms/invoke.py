"""Grand-Challenge's invoke API: the grader as the HTTP server an evaluation method may be.

An image labelled ``org.grand-challenge.api-method=invoke`` is started once as a server; the
shim then polls ``GET /health`` until it answers 200 (every 10 s, for up to 300 s; a redirect
fails at once), places the inputs in ``/input`` and calls ``POST /invoke``, which must answer
201 when ``/output`` is written; any other answer fails the evaluation (rse-sagemaker-shim
``models.py``: ``UserProcess.setup``, ``health_check``, ``invoke``; the starter kit's
evaluation method, DIAGNijmegen/demo-challenge-pack ``example_evaluation_method/app.py``).
Without the label the image is started per evaluation (exec), which stays the default.

Each ``/invoke`` grades in a fresh ``python -m evaluation`` process with the server's own
stdout and stderr, so the scoring, the outputs and the participant's last stderr line are the
exec flavour's exactly: sagemaker-shim 0.8.3 reports the user process's last error line for a
failed invoke (rse-grand-challenge issue #4971, a thread: the shim's code of that release is
not published where we could read it; 0.7 reported "Invoke endpoint returned status ...").
The server itself writes nothing on stderr. Its answer to a failed grading is 422 when the
submission is unusable (exit 2) and 500 otherwise.
"""

import json
import subprocess
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from evaluation import log
from evaluation.errors import EXIT_OK, EXIT_SUBMISSION

PORT = 4743  # fixed by the platform: GRAND_CHALLENGE_COMPONENT_USER_WEBSERVER_PORT is stripped before the user process starts
_log = log.get(__name__)


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def do_GET(self) -> None:
        self._answer(HTTPStatus.OK if self.path == "/health" else HTTPStatus.NOT_FOUND)

    def do_POST(self) -> None:
        if self.path != "/invoke":
            self._answer(HTTPStatus.NOT_FOUND)
        elif not self.server.busy.acquire(blocking=False):
            self._answer(HTTPStatus.CONFLICT, {"error": "an evaluation is already running"})
        else:
            try:
                status = self.server.grade()
            finally:
                self.server.busy.release()
            code = {EXIT_OK: HTTPStatus.CREATED, EXIT_SUBMISSION: HTTPStatus.UNPROCESSABLE_ENTITY}
            self._answer(code.get(status, HTTPStatus.INTERNAL_SERVER_ERROR), {"exit_status": status})

    def _answer(self, status: HTTPStatus, body: dict | None = None) -> None:
        content = json.dumps(body or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        """Requests go to the log on stdout, never to stderr (see the module docstring)."""
        _log.debug("http_request", request=format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, grading_arguments: list[str]):
        super().__init__(("0.0.0.0", port), _Handler)
        self.busy = threading.Lock()
        self.grading_arguments = grading_arguments

    def grade(self) -> int:
        _log.info("invoke")
        return subprocess.run([sys.executable, "-m", "evaluation", *self.grading_arguments]).returncode


def serve(arguments: list[str]) -> int:
    """``python -m evaluation serve [--port N] [grading arguments]``: answer Grand-Challenge's
    invoke calls until terminated; each ``/invoke`` runs ``python -m evaluation`` with the
    grading arguments (by default the container's paths, as exec does)."""
    port = PORT
    if arguments[:1] == ["--port"]:
        port, arguments = int(arguments[1]), arguments[2:]
    with _Server(port, arguments) as server:
        _log.info("serving", port=port, api="invoke")
        server.serve_forever()
    return EXIT_OK
