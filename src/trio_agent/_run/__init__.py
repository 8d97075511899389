"""The trio driver of one run: stream, batch, event delivery, the runner, the queues, the
runtime side of the observer, the model streams made in memory and wrapped, the loop's entry points.

This is the layer's surface: the ``Agent``, the public facade and the edges import what
they need from here (``from .._run import Runner``), never from a module of the package.
It imports only from ``_core``.
"""

from ._cancel import NO_SCOPE, representative
from ._delivery import EventDelivery
from ._loop import AgentRun, open_agent_loop, run_agent_loop
from ._observe import ObservedCall, ObservedStream, Probe
from ._queues import MODES, Kind, MessageQueues, QueueMode
from ._resume import DeferredSource, in_memory, plan_for, resume
from ._runner import OnEvent, Runner
from ._stream import StreamAccumulator
from ._streams import EventHolds, MemoryStream, StreamOwner, StreamWrapper

__all__ = [
    "MODES",
    "NO_SCOPE",
    "AgentRun",
    "DeferredSource",
    "EventDelivery",
    "EventHolds",
    "Kind",
    "MemoryStream",
    "MessageQueues",
    "ObservedCall",
    "ObservedStream",
    "OnEvent",
    "Probe",
    "QueueMode",
    "Runner",
    "StreamAccumulator",
    "StreamOwner",
    "StreamWrapper",
    "in_memory",
    "open_agent_loop",
    "plan_for",
    "representative",
    "resume",
    "run_agent_loop",
]
