"""Hypothesis profiles for every test folder: `ci` (bounded, what .ci/run uses), `thorough`
(thousands of examples, on demand) and `dev` (the default: quick). Pick one with the
HYPOTHESIS_PROFILE environment variable."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("thorough", max_examples=2500, deadline=None)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
