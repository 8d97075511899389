"""trio-agent: a trio-native agent loop runtime.

The implementation lives in private modules (``_messages``, ``_events``, ``_loop``...);
this module only re-exports the public names. ``trio_agent.testing`` is the public test
kit, ``trio_agent.providers`` the HTTP models, ``trio_agent.tools`` the workspace tools.
"""

from ._agent import Agent as Agent
from ._agent import AgentState as AgentState
from ._agent import open_agent as open_agent
from ._decorator import tool as tool
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
from ._hooks import AfterToolCallContext as AfterToolCallContext
from ._hooks import AfterToolCallResult as AfterToolCallResult
from ._hooks import BeforeToolCallContext as BeforeToolCallContext
from ._hooks import BeforeToolCallResult as BeforeToolCallResult
from ._hooks import Context as Context
from ._hooks import LoopConfig as LoopConfig
from ._hooks import NextTurn as NextTurn
from ._hooks import TurnContext as TurnContext
from ._jsonl import JsonlTranscript as JsonlTranscript
from ._jsonl import LoadedTranscript as LoadedTranscript
from ._jsonl import load_transcript as load_transcript
from ._jsonl import write_transcript as write_transcript
from ._loop import AgentRun as AgentRun
from ._loop import AgentRunResult as AgentRunResult
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
from ._serde import dumps as dumps
from ._serde import loads as loads
from ._tools import Tool as Tool
from ._tools import ToolContext as ToolContext
from ._tools import ToolOutput as ToolOutput
from ._transcript import check_transcript as check_transcript
from ._transcript import repair as repair

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
