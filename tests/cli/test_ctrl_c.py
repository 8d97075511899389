"""Ctrl-C in the command line: a cancel that lets every run close cleanly, then
``KeyboardInterrupt`` (``cli._common.cancelled_by_ctrl_c``, used by ``trio-agent fleet``).

The signal is real (``os.kill`` of this process, delivered to the main thread, where
``trio.run`` runs); ``fail_after`` bounds each wait, so a missed signal fails instead of
hanging.
"""

from __future__ import annotations

import os
import signal

import pytest
import trio

from trio_agent.cli._common import cancelled_by_ctrl_c


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_the_first_ctrl_c_cancels_and_lets_the_clean_up_finish() -> None:
    log: list[str] = []

    async def work() -> str:
        try:
            with trio.fail_after(10):
                _ctrl_c()
                await trio.sleep_forever()
        except trio.Cancelled:
            log.append("cancelled")
            raise
        finally:
            # A clean-up that waits, as a run delivering its closing events does.
            with trio.CancelScope(shield=True):
                await trio.sleep(0.01)
                log.append("cleaned up")
        return "never"

    with pytest.raises(KeyboardInterrupt):
        trio.run(cancelled_by_ctrl_c, work)
    assert log == ["cancelled", "cleaned up"]


def test_a_second_ctrl_c_stops_a_clean_up_that_hangs() -> None:
    log: list[str] = []

    async def work() -> None:
        try:
            _ctrl_c()
            await trio.sleep_forever()
        finally:
            log.append("cleaning up")
            with trio.CancelScope(shield=True), trio.fail_after(10):
                _ctrl_c()
                await trio.sleep_forever()  # only the second Ctrl-C ends this

    with pytest.raises(KeyboardInterrupt):
        trio.run(cancelled_by_ctrl_c, work)
    assert log == ["cleaning up"]


def test_without_ctrl_c_the_result_or_the_error_comes_back_as_it_is() -> None:
    async def value() -> int:
        await trio.lowlevel.checkpoint()
        return 42

    async def fails() -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("bad tasks file")

    assert trio.run(cancelled_by_ctrl_c, value) == 42
    with pytest.raises(ValueError, match="bad tasks file"):  # not an exception group
        trio.run(cancelled_by_ctrl_c, fails)
    # The default handler is back once it returns.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
