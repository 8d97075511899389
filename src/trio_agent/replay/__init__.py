"""Record a real session once, replay it forever: cassettes of model traffic.

``RecordingModel(model, path)`` wraps any model and writes each request and the
stream that answered it to a JSONL cassette; ``ReplayModel(path)`` plays the cassette
back as a model — strictly (a request that differs fails, naming the field) or in
sequence — on trio's clock or at full speed, and can inject faults (``Fault``: raise,
error, stall or cut at any event). ``faults(cassette)`` is a Hypothesis strategy of such
faults (it needs Hypothesis: ``pip install 'trio-agent[test]'``, imported on first call).

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

if typing.TYPE_CHECKING:
    from ._strategies import faults as faults
else:

    def faults(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        """The Hypothesis strategy ``_strategies.faults`` (Hypothesis imported on first call)."""
        try:
            from ._strategies import faults as strategy
        except ModuleNotFoundError as exc:
            if exc.name != "hypothesis":
                raise
            raise ImportError(
                "trio_agent.replay.faults() needs Hypothesis: pip install 'trio-agent[test]'"
            ) from exc
        return strategy(*args, **kwargs)


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
