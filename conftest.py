"""Hypothesis profiles for every test folder: `ci` (bounded, what .ci/run uses), `thorough`
(thousands of examples, on demand) and `dev` (the default: quick). Pick one with the
HYPOTHESIS_PROFILE environment variable."""

from __future__ import annotations

import os

from hypothesis import settings

# `ci`: ~200 generated runs per loop property and 100 Agent state machines keep the
# whole CI test step well under a minute. print_blob: a CI failure prints the line that
# replays it (@reproduce_failure).
settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
# `thorough`: 2,500 runs per loop property, 1,250 Agent state machines (a few minutes).
settings.register_profile("thorough", max_examples=2500, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# The real browser of the report tests (tests/report, property_tests), defined here once:
# Playwright drives one browser per thread at a time.
from tests.kit.browser import browser  # noqa: E402

__all__ = ["browser"]
