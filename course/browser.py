"""Headless Chromium and a real JupyterLab for scripts: the benchmarks (course.bench) and the browser tests.

Debian's chromium (or ``$CHROMIUM``) driven by Playwright, which never downloads a browser; a page load
that records what went wrong (:class:`PageVisit`); a throwaway JupyterLab 4 server (:class:`LabServer`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

# Debian's chromium here and in .ci/run; the GitHub workflow points CHROMIUM at the runner's Chrome
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PageVisit:
    """One page load with everything that went wrong on the way recorded."""

    def __init__(self, page, url: str):
        self.page = page
        self.url = url
        self.third_party: list[str] = []
        self.failed: list[str] = []
        self.console_errors: list[str] = []
        self.bytes_by_url: dict[str, int] = {}
        page.route("**/*", self._route)
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        page.on("response", self._response)
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.console_errors.append(f"uncaught: {e}"))

    def _route(self, route):
        host = urlsplit(route.request.url).hostname
        if route.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
        else:
            self.third_party.append(route.request.url)
            route.abort()

    def _response(self, response):
        if response.status >= 400:
            self.failed.append(f"{response.url} (HTTP {response.status})")
        try:
            length = int(response.headers.get("content-length", "0"))
        except ValueError:
            length = 0
        self.bytes_by_url[response.url] = length

    def settle(self):
        """Wait for the network and MathJax to finish (no page loads a widget manager)."""
        self.page.wait_for_load_state("networkidle")
        self.page.evaluate(
            "() => (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) || null"
        )
        self.page.wait_for_timeout(300)


# ---- a real JupyterLab 4 (tests/browser/test_jupyterlab.py and course/bench/keypress.py) ----------------

# JupyterLab's settings for a run driven from a script: the whole notebook rendered (not only the cells on
# screen), no autosave, no news or update checks
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
}
# JavaScript for the page's `window.jupyterapp` (--expose-app-in-browser): the open notebook panel, "it is
# open and its kernel idle", and "every code cell has run"
PANEL = "window.jupyterapp.shell.currentWidget"
READY = (f"window.jupyterapp && {PANEL} && {PANEL}.context && {PANEL}.context.isReady && "
         f"{PANEL}.sessionContext.session && {PANEL}.sessionContext.session.kernel && "
         f"{PANEL}.sessionContext.session.kernel.status === 'idle'")
ALL_RUN = f"""(() => {{ const p = {PANEL}; const k = p.sessionContext.session.kernel;
  return k.status === 'idle' && p.content.widgets.filter(c => c.model.type === 'code')
    .every(c => c.model.executionCount !== null); }})()"""



@contextmanager
def lab_notebook(browser, lab: "LabServer", stem: str, failure_png: Path | None = None):
    """notebooks/<stem>.ipynb opened in ``lab`` in a new 1280 x 900 tab (a fresh workspace), its kernel idle:
    yields (page, visit). An exception inside saves a screenshot to ``failure_png``, when given."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    visit = PageVisit(page, lab.url(f"lab/tree/notebooks/{stem}.ipynb?reset"))
    try:
        page.goto(visit.url)  # no settle(): JupyterLab's network never goes idle
        page.wait_for_function(READY, timeout=90_000)
        yield page, visit
    except Exception:
        if failure_png is not None:
            page.screenshot(path=str(failure_png))
        raise
    finally:
        context.close()


def run_all_cells(page, timeout_s: float) -> None:
    """Run every cell of the open notebook and wait until each has run and the kernel is idle (the command
    is not awaited: its promise settles only when every cell has run). Playwright's TimeoutError after
    ``timeout_s`` seconds."""
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_timeout(1000)
    page.wait_for_function(ALL_RUN, timeout=timeout_s * 1000)

class LabServer:
    """``jupyter lab`` from this environment, headless on a free port of 127.0.0.1 behind a random token,
    serving a copy of ``notebooks`` with its settings, runtime files and log all in ``home``. A context
    manager; RuntimeError with the end of the log when the server exits or does not answer in time."""

    def __init__(self, home: Path, notebooks: Path, timeout: float = 90.0):
        self.home, self.notebooks, self.timeout = Path(home), Path(notebooks), timeout
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        self._server = self._log = None

    def url(self, path: str) -> str:
        """The URL of ``path`` (e.g. "lab/tree/notebooks/x.ipynb?reset") with the token."""
        return self.base + path + ("&" if "?" in path else "?") + f"token={self.token}"

    def log_tail(self, n: int = 3000) -> str:
        log = self.home / "server.log"
        return log.read_text(errors="replace")[-n:] if log.is_file() else ""

    def __enter__(self) -> LabServer:
        shutil.copytree(self.notebooks, self.home / "root" / "notebooks", dirs_exist_ok=True)
        for name, value in LAB_SETTINGS.items():
            path = self.home / "settings" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(self.home / "settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(self.home / "workspaces"),
                   JUPYTER_RUNTIME_DIR=str(self.home / "runtime"), JUPYTER_CONFIG_DIR=str(self.home / "config"),
                   JUPYTER_DATA_DIR=str(self.home / "data"))
        self._log = (self.home / "server.log").open("w")
        self._server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", f"--IdentityProvider.token={self.token}",
             "--ServerApp.password=", "--expose-app-in-browser", "--allow-root", f"--port={self.port}",
             "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={self.home / 'root'}",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.home)
        try:
            self._wait()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            if self._server.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self._server.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not answer in {self.timeout:g} s:\n{self.log_tail()}")
            time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        if self._server is not None:
            self._server.terminate()
            try:
                self._server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
            self._server = None
        if self._log is not None:
            self._log.close()
            self._log = None
