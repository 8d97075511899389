"""A real browser for the report tests: Debian's chromium, headless, driven by
Playwright (pointed at the system browser: no browser of Playwright's own is
downloaded). Where there is none the tests skip, saying why; with
``TRIO_AGENT_REQUIRE_BROWSER`` set (CI sets it once it installed chromium) they fail.

:func:`browser` (a fixture) starts it once per test module (or says why it cannot:
the tests that need it skip with that reason). :func:`load` opens a page from its file URL in a
fresh context, with every request that is not the page's own ``file:`` URL refused and
recorded, and every console error and uncaught exception recorded: a page that reaches
for the network, or whose script fails, fails the test that loaded it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page, Request, Route

CHROMIUM = os.environ.get("TRIO_AGENT_CHROMIUM", "/usr/bin/chromium")
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
ARTIFACTS = Path(
    os.environ.get(
        "TRIO_AGENT_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"
    )
)
"""Where the browser tests keep their screenshots (``test-artifacts/browser/``)."""


def why_no_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if shutil.which(CHROMIUM) is None:
        return (
            f"no chromium at {CHROMIUM}: install Debian's chromium (apt-get install "
            "chromium; .ci/run does it) or point TRIO_AGENT_CHROMIUM at one"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing: pip install -e '.[test]'"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """The browser, headless, with a fresh profile, one per test module (Playwright's
    event loop lives only while a module of browser tests runs, never beside another
    test's); the test is skipped, saying why, where there is none."""
    reason = why_no_browser()
    if reason is not None:
        if os.environ.get("TRIO_AGENT_REQUIRE_BROWSER"):  # CI installed one: must run
            pytest.fail(f"TRIO_AGENT_REQUIRE_BROWSER is set, but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(FLAGS))
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Loaded:
    """A page loaded from a file, with what it did."""

    page: Page
    errors: list[str] = field(default_factory=list)
    """Console errors and uncaught exceptions."""
    requests: list[str] = field(default_factory=list)
    """Every URL the page asked for (its own file included)."""

    @property
    def outside(self) -> list[str]:
        """The requests that were not for a ``file:`` URL."""
        return [url for url in self.requests if not url.startswith("file:")]

    def check_clean(self) -> None:
        """Assert no console error, no uncaught exception, no request off the page."""
        assert self.errors == []
        assert self.outside == []

    def eval(self, script: str, arg: Any = None) -> Any:
        return self.page.evaluate(script, arg)


def load(browser: Browser, path: Path, *, width: int = 1200, height: int = 900) -> Loaded:
    """Open ``path`` in a fresh context of ``browser`` (see the module); the caller
    closes ``loaded.page.context``."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    loaded = Loaded(page)

    def refuse(route: Route) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            route.abort()

    def on_request(request: Request) -> None:
        loaded.requests.append(request.url)

    context.route("**/*", refuse)
    page.on("request", on_request)
    page.on("console", lambda m: loaded.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: loaded.errors.append(f"uncaught: {e}"))
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-rendered=true]", timeout=10_000)
    return loaded


def screenshot(loaded: Loaded, name: str) -> Path:
    """A full-page screenshot kept under :data:`ARTIFACTS` ``/browser/name.png``."""
    target = ARTIFACTS / "browser" / f"{name}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    loaded.page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 0
    return target
