"""trio-agent: a trio-native agent loop runtime.

This module only re-exports the public names. Where things live, layer by layer (a module
imports only from its own layer or the ones before it; ``tests/test_layering.py`` checks):

- values: ``_util`` (maybe_await, make_result, representative), ``_errors``,
  ``_messages``, ``_events``, ``_serde`` (JSON), ``_model`` (the model protocol),
  ``_observer`` (the observer protocol, log lines), ``_tools``, ``_config`` (Context,
  LoopConfig, hook contexts, AgentRunResult);
- rules: ``_arguments``, ``_conversion``, ``_tool_decorator`` (``@tool``), ``_policy``
  (the stop-reason table), ``_blocks`` (what a reply that ends early keeps),
  ``_call_ids`` (a fresh id for a reused call id);
- loop: ``_stream`` (one reply), ``_batch`` (one batch of calls: the batch nursery),
  ``_sink`` (event delivery), ``_run_state`` (one run's state and its synchronous
  changes), ``_runner`` (the loop that drives it), ``_loop`` (run_agent_loop,
  open_agent_loop);
- agent: ``_queues`` (take and put back queued messages), ``_fanout`` (events to the
  subscribers), ``_agent_state`` (AgentState, read from the live run), ``_agent_run``
  (one run at a time: begin, the queue polls, the end), ``_agent`` (Agent, open_agent);
- disk: ``_pairing`` (check_transcript, repair), ``_locked_file`` (flock, durable
  writes), ``_jsonl`` (JSONL transcripts);
- edges: ``trio_agent.providers`` (HTTP models), ``trio_agent.tools`` (workspace tools),
  ``trio_agent.mcp``, ``trio_agent.replay`` (cassettes), ``trio_agent.telemetry``
  (OpenTelemetry spans);
- test kit: ``trio_agent.testing``;
- command line: ``trio_agent.cli`` (``trio-agent``); ``trio_agent._bench``, the benchmark
  workloads ``trio-agent bench`` runs.

``__version__`` is the installed distribution's version (from its metadata).
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from ._agent import Agent as Agent
from ._agent import AgentState as AgentState
from ._agent import open_agent as open_agent
from ._config import AfterToolCallContext as AfterToolCallContext
from ._config import AfterToolCallResult as AfterToolCallResult
from ._config import AgentRunResult as AgentRunResult
from ._config import BeforeToolCallContext as BeforeToolCallContext
from ._config import BeforeToolCallResult as BeforeToolCallResult
from ._config import Context as Context
from ._config import LoopConfig as LoopConfig
from ._config import NextTurn as NextTurn
from ._config import TurnContext as TurnContext
from ._errors import AgentBusyError as AgentBusyError
from ._errors import AgentRunError as AgentRunError
from ._errors import AgentUsageError as AgentUsageError
from ._errors import TranscriptError as TranscriptError
from ._errors import TranscriptFormatError as TranscriptFormatError
from ._errors import TrioAgentError as TrioAgentError
from ._events import AgentEnd as AgentEnd
from ._events import AgentEvent as AgentEvent
from ._events import AgentStart as AgentStart
from ._events import AssistantEvent as AssistantEvent
from ._events import CallTiming as CallTiming
from ._events import Done as Done
from ._events import EndReason as EndReason
from ._events import Error as Error
from ._events import MessageEnd as MessageEnd
from ._events import MessageStart as MessageStart
from ._events import MessageUpdate as MessageUpdate
from ._events import Start as Start
from ._events import TextDelta as TextDelta
from ._events import TextEnd as TextEnd
from ._events import TextStart as TextStart
from ._events import ThinkingDelta as ThinkingDelta
from ._events import ThinkingEnd as ThinkingEnd
from ._events import ThinkingStart as ThinkingStart
from ._events import ToolCallDelta as ToolCallDelta
from ._events import ToolCallEnd as ToolCallEnd
from ._events import ToolCallStart as ToolCallStart
from ._events import ToolExecutionEnd as ToolExecutionEnd
from ._events import ToolExecutionStart as ToolExecutionStart
from ._events import ToolExecutionUpdate as ToolExecutionUpdate
from ._events import ToolOutcome as ToolOutcome
from ._events import TurnEnd as TurnEnd
from ._events import TurnStart as TurnStart
from ._events import TurnStats as TurnStats
from ._jsonl import JsonlTranscript as JsonlTranscript
from ._jsonl import LoadedTranscript as LoadedTranscript
from ._jsonl import load_transcript as load_transcript
from ._jsonl import write_transcript as write_transcript
from ._loop import AgentRun as AgentRun
from ._loop import open_agent_loop as open_agent_loop
from ._loop import run_agent_loop as run_agent_loop
from ._messages import AssistantMessage as AssistantMessage
from ._messages import ContentBlock as ContentBlock
from ._messages import CustomMessage as CustomMessage
from ._messages import Image as Image
from ._messages import Message as Message
from ._messages import StopReason as StopReason
from ._messages import Text as Text
from ._messages import Thinking as Thinking
from ._messages import ToolCall as ToolCall
from ._messages import ToolResultMessage as ToolResultMessage
from ._messages import Usage as Usage
from ._messages import UserMessage as UserMessage
from ._model import Model as Model
from ._model import ModelOptions as ModelOptions
from ._model import ModelRequest as ModelRequest
from ._model import ToolSpec as ToolSpec
from ._observer import CallObservation as CallObservation
from ._observer import Observer as Observer
from ._observer import RequestObservation as RequestObservation
from ._observer import RunObservation as RunObservation
from ._pairing import check_transcript as check_transcript
from ._pairing import repair as repair
from ._serde import dumps as dumps
from ._serde import loads as loads
from ._tool_decorator import tool as tool
from ._tools import Tool as Tool
from ._tools import ToolContext as ToolContext
from ._tools import ToolOutput as ToolOutput

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "Agent",
    "AgentBusyError",
    "AgentEnd",
    "AgentEvent",
    "AgentRun",
    "AgentRunError",
    "AgentRunResult",
    "AgentStart",
    "AgentState",
    "AgentUsageError",
    "AssistantEvent",
    "AssistantMessage",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "CallObservation",
    "CallTiming",
    "ContentBlock",
    "Context",
    "CustomMessage",
    "Done",
    "EndReason",
    "Error",
    "Image",
    "JsonlTranscript",
    "LoadedTranscript",
    "LoopConfig",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Model",
    "ModelOptions",
    "ModelRequest",
    "NextTurn",
    "Observer",
    "RequestObservation",
    "RunObservation",
    "Start",
    "StopReason",
    "Text",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "Thinking",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolContext",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolOutcome",
    "ToolOutput",
    "ToolResultMessage",
    "ToolSpec",
    "TranscriptError",
    "TranscriptFormatError",
    "TrioAgentError",
    "TurnContext",
    "TurnEnd",
    "TurnStart",
    "TurnStats",
    "Usage",
    "UserMessage",
    "check_transcript",
    "dumps",
    "load_transcript",
    "loads",
    "open_agent",
    "open_agent_loop",
    "repair",
    "run_agent_loop",
    "tool",
    "write_transcript",
]

try:
    __version__: str = _version("trio-agent")
except _PackageNotFoundError:  # pragma: no cover - imported from a bare source tree
    __version__ = "0+unknown"
