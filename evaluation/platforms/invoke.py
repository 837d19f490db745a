"""Grand-Challenge's invoke API: the grader as the HTTP server an evaluation method may be.

An image labelled ``org.grand-challenge.api-method=invoke`` is started once as a server; the
shim then polls ``GET http://127.0.0.1:4743/health`` until it answers 200 (every 10 s, for up
to 300 s; a redirect fails at once), places the inputs in ``/input`` and calls ``POST /invoke``,
which must answer 201 when ``/output`` is written; any other answer fails the evaluation
(rse-sagemaker-shim ``models.py``: ``UserProcess.setup``, ``health_check``, ``invoke``; the
starter kit's evaluation method, DIAGNijmegen/demo-challenge-pack
``example_evaluation_method/app.py``). Without the label the image is started per evaluation
(exec), which stays the default.

Each ``/invoke`` grades in a fresh ``python -m evaluation`` process with the server's own
stdout and stderr, so the scoring, the outputs and the participant's last stderr line are the
exec flavour's exactly: sagemaker-shim 0.8.3 reports the user process's last error line for a
failed invoke (rse-grand-challenge issue #4971, a thread: the shim's code of that release is
not published where we could read it; 0.7 reported "Invoke endpoint returned status ...").
The server itself writes nothing on stderr, not even for a caller that goes away: its own
events go to the log on stdout. Its answer to a failed grading is 422 when the submission is
unusable (exit 2) and 500 otherwise.

The server is one asyncio loop, so an idle or slow connection costs a few kilobytes and no
thread: the shim's calls come from inside the container, so it listens on loopback only; a
connection must send its request head within ``HEAD_SECONDS`` (at most ``MAX_HEAD_BYTES``)
and at most ``MAX_CONNECTIONS`` are open at once (more are closed at once), so a flood of
half-open connections neither starves ``/health`` nor outlives its bound.
"""

import asyncio
import json
import resource
import sys
from http import HTTPStatus

from evaluation import log
from evaluation.errors import EXIT_OK, EXIT_SUBMISSION

PORT = 4743  # fixed by the platform: GRAND_CHALLENGE_COMPONENT_USER_WEBSERVER_PORT is stripped before the user process starts
HOST = "127.0.0.1"  # the shim calls 127.0.0.1 (models.py health_check, invoke)
MAX_CONNECTIONS = 512
HEAD_SECONDS = 10.0
MAX_HEAD_BYTES = 16 << 10
MAX_BODY_BYTES = 1 << 20  # the shim posts no body; a larger one is refused unread
WRITE_SECONDS = 10.0
_log = log.get(__name__)


class _Refused(Exception):
    """A request this server does not read: its status and reason."""

    def __init__(self, status: HTTPStatus, reason: str):
        super().__init__(reason)
        self.status = status


class InvokeServer:
    """The connections of one server: at most one grading at a time."""

    def __init__(self, grading_arguments: list[str]):
        self.grading_arguments = grading_arguments
        self.grading = False
        self.open = 0

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= MAX_CONNECTIONS:
            _log.debug("connection_refused", open=self.open)
            writer.transport.abort()
            return
        self.open += 1
        try:
            try:
                method, path = await asyncio.wait_for(_request_head(reader), HEAD_SECONDS)
                status, body = await self.answer(method, path)
            except _Refused as refused:
                status, body = refused.status, {"error": str(refused)}
            await asyncio.wait_for(_respond(writer, status, body), WRITE_SECONDS)
        except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            _log.debug("connection_dropped", reason=type(exc).__name__)  # the caller went away or stalled
        finally:
            self.open -= 1
            writer.transport.abort()

    async def answer(self, method: str, path: str) -> tuple[HTTPStatus, dict]:
        _log.debug("http_request", method=method, path=path)
        if (method, path) == ("GET", "/health"):
            return HTTPStatus.OK, {}
        if (method, path) != ("POST", "/invoke"):
            return HTTPStatus.NOT_FOUND, {}
        if self.grading:
            return HTTPStatus.CONFLICT, {"error": "an evaluation is already running"}
        self.grading = True
        try:
            _log.info("invoke")
            process = await asyncio.create_subprocess_exec(sys.executable, "-m", "evaluation", *self.grading_arguments)
            status = await process.wait()
        finally:
            self.grading = False
        code = {EXIT_OK: HTTPStatus.CREATED, EXIT_SUBMISSION: HTTPStatus.UNPROCESSABLE_ENTITY}
        return code.get(status, HTTPStatus.INTERNAL_SERVER_ERROR), {"exit_status": status}


async def _request_head(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The method and path of one HTTP/1.x request; its body (if any, and small) read past."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    request_line, *fields = head.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Refused(HTTPStatus.BAD_REQUEST, "not an HTTP/1 request line")
    length = 0
    for field in fields:
        name, _, value = field.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip()) if value.strip().isdigit() else -1
    if not 0 <= length <= MAX_BODY_BYTES:
        raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the request body is refused")
    await reader.readexactly(length)
    return parts[0], parts[1]


async def _respond(writer: asyncio.StreamWriter, status: HTTPStatus, body: dict) -> None:
    content = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(content)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode() + content)
    await writer.drain()


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """The loop's own errors (an accept that failed, say) to the log, never to stderr."""
    _log.warning("server_error", message=context.get("message"), error=repr(context.get("exception")))


async def _serve(port: int, grading_arguments: list[str]) -> None:
    asyncio.get_running_loop().set_exception_handler(_log_loop_error)
    server = await asyncio.start_server(InvokeServer(grading_arguments).connection, HOST, port, limit=MAX_HEAD_BYTES, backlog=128)
    _log.info("serving", host=HOST, port=port, api="invoke", max_connections=MAX_CONNECTIONS)
    async with server:
        await server.serve_forever()


def serve(arguments: list[str]) -> int:
    """``python -m evaluation serve [--port N] [grading arguments]``: answer Grand-Challenge's
    invoke calls until terminated; each ``/invoke`` runs ``python -m evaluation`` with the
    grading arguments (by default the container's paths, as exec does)."""
    port = PORT
    if arguments[:1] == ["--port"]:
        port, arguments = int(arguments[1]), arguments[2:]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < MAX_CONNECTIONS + 64 <= hard:  # room for every connection's socket
        resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_CONNECTIONS + 64, hard))
    asyncio.run(_serve(port, arguments))
    return EXIT_OK
