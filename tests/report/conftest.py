"""The report tests' browser fixture (see tests/kit/browser.py)."""

from tests.kit.browser import browser

__all__ = ["browser"]
