"""Fixtures for the provider tests: a real HTTP server on 127.0.0.1 (real clock)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.kit.http_server import Server, serve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serve() as s:
        yield s
