"""Record a real session once, replay it forever: cassettes of model traffic.

``RecordingModel(model, path)`` wraps any model and writes each request and the
stream that answered it to a JSONL cassette; ``ReplayModel(path)`` plays the cassette
back as a model — strictly (a request that differs fails, naming the field) or in
sequence — on trio's clock or at full speed, and can inject faults (``Fault``: raise,
error, stall or cut at any event). ``faults(cassette)`` is a Hypothesis strategy of such
faults (it needs Hypothesis: ``pip install 'trio-agent[testing]'``, imported on first access).

Nothing in the loop imports this package; it uses only the public model protocol.
"""

import typing

from ._cassette import Cassette as Cassette
from ._cassette import CassetteFormatError as CassetteFormatError
from ._cassette import CassetteRecord as CassetteRecord
from ._cassette import EndKind as EndKind
from ._cassette import RecordedEvent as RecordedEvent
from ._cassette import StreamEnd as StreamEnd
from ._cassette import load_cassette as load_cassette
from ._cassette import message_differences as message_differences
from ._cassette import request_differences as request_differences
from ._cassette import request_digest as request_digest
from ._record import RecordingModel as RecordingModel
from ._replay import CassetteMismatch as CassetteMismatch
from ._replay import Fault as Fault
from ._replay import FaultKind as FaultKind
from ._replay import InjectedFault as InjectedFault
from ._replay import RecordedError as RecordedError
from ._replay import ReplayModel as ReplayModel
from ._session import SessionReplay as SessionReplay
from ._session import replay_session as replay_session

# ``faults`` imports Hypothesis, a test dependency: the module ``__getattr__`` (PEP 562)
# imports it on first access and hands back the real function.
if typing.TYPE_CHECKING:
    from ._strategies import faults as faults
else:

    def __getattr__(name: str) -> typing.Any:
        """``faults``, imported (with Hypothesis) on first access.

        Raises:
            ImportError: Hypothesis is not installed (``pip install 'trio-agent[testing]'``).
            AttributeError: any other missing name.
        """
        if name != "faults":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        try:
            from ._strategies import faults
        except ModuleNotFoundError as exc:
            if exc.name != "hypothesis":
                raise
            raise ImportError(
                "trio_agent.replay.faults needs Hypothesis: pip install 'trio-agent[testing]'"
            ) from exc
        globals()["faults"] = faults  # later accesses skip this function
        return faults

    def __dir__() -> list[str]:
        return sorted({*globals(), "faults"})


__all__ = [
    "Cassette",
    "CassetteFormatError",
    "CassetteMismatch",
    "CassetteRecord",
    "EndKind",
    "Fault",
    "FaultKind",
    "InjectedFault",
    "RecordedError",
    "RecordedEvent",
    "RecordingModel",
    "ReplayModel",
    "SessionReplay",
    "StreamEnd",
    "faults",
    "load_cassette",
    "message_differences",
    "replay_session",
    "request_differences",
    "request_digest",
]
