"""A real headless browser (Debian's Chromium) opening the pages the grader writes.

Driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages ended by
NUL on file descriptors 3 and 4), so no port, no WebSocket library and no driver are needed.
Every request the page makes is recorded (a self-contained page makes none but its own file and
``data:`` URLs), as are its console messages, uncaught exceptions and the browser's log; the
host resolver answers nothing, so a page that tries the network fails instead of reaching it.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome")
REQUIRED = "EVALUATION_REQUIRE_BROWSER"  # set by .ci/run: a missing browser fails, not skips
FLAGS = (
    "--headless=new",
    "--remote-debugging-pipe",
    "--no-sandbox",  # containers and CI runners have no user namespaces for its sandbox
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
)


def executable() -> str | None:
    return next((found for name in NAMES if (found := shutil.which(name))), None)


@dataclass
class Page:
    """What the browser saw opening one page."""

    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)  # console calls, exceptions, log entries
    facts: dict = field(default_factory=dict)  # the page's own measurements (``MEASURE``)
    screenshot: bytes = b""

    def problems(self, path: Path) -> list[str]:
        own = path.resolve().as_uri()
        foreign = [url for url in self.requests if url != own and not url.startswith("data:")]
        return [f"loads {url}" for url in foreign] + [f"console: {line}" for line in self.console]


# Measured in the page once it has loaded: what a reader would see broken.
MEASURE = """(() => {
  const broken = [...document.images].filter(i => !i.complete || i.naturalWidth === 0).length;
  const svgs = [...document.querySelectorAll('svg')];
  const empty = svgs.filter(s => { const b = s.getBoundingClientRect(); return b.width < 2 || b.height < 2; }).length;
  return {title: document.title, text: document.body ? document.body.innerText.length : 0,
          width: document.documentElement.scrollWidth, viewport: window.innerWidth,
          height: document.documentElement.scrollHeight,
          images: document.images.length, broken_images: broken, svgs: svgs.length, empty_svgs: empty,
          tables: document.querySelectorAll('table').length};
})()"""


class Browser:
    """One Chromium process; ``open(path)`` loads a page in a fresh tab and reports it."""

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 30.0):
        found = executable()
        if found is None:
            raise FileNotFoundError("no Chromium on PATH (Debian: apt-get install chromium)")
        self.width, self.height, self.timeout = width, height, timeout
        self._profile = tempfile.mkdtemp(prefix="browser-profile-")
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def wire() -> None:  # the child's fd 3 reads our commands, fd 4 carries its answers
            reading, writing = os.dup(to_browser_read), os.dup(from_browser_write)  # apart from 3 and 4
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self._process = subprocess.Popen(
            [found, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            pass_fds=(3, 4),  # kept open through the exec: ``wire`` (run before the others close) made them
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self._process.wait(timeout=10)
        except Exception:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def _wait_for(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self._events):
            self._events.append(self._read_message(deadline))

    def open(self, path: Path, settle: float = 0.3) -> Page:
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self._send(f"{domain}.enable", session=session)
        self._send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self._events.clear()
        self._send("Page.navigate", {"url": path.resolve().as_uri()}, session)
        self._wait_for("Page.loadEventFired", session)
        time.sleep(settle)  # late console messages (scripts after load)
        facts = self._send("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True}, session)
        shot = self._send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        page = Page(facts=facts["result"]["value"], screenshot=base64.b64decode(shot["data"]))
        for event in self._events:
            if event.get("sessionId") != session:
                continue
            self._record(page, event["method"], event.get("params", {}))
        self._send("Target.closeTarget", {"targetId": target})
        return page

    @staticmethod
    def _record(page: Page, method: str, params: dict) -> None:
        if method == "Network.requestWillBeSent":
            page.requests.append(params["request"]["url"])
        elif method == "Runtime.consoleAPICalled":
            page.console.append(
                f"{params['type']}: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Runtime.exceptionThrown":
            page.console.append("exception: " + params["exceptionDetails"].get("text", ""))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            page.console.append(f"{entry['level']}: {entry['text']} {entry.get('url', '')}".rstrip())
