"""trio-agent: a trio-native agent loop runtime.

A run streams a model's reply, runs the tool calls it asks for concurrently in a trio
nursery, feeds the results back in the order the calls were declared, and repeats until
the model is done. However it ends — normally, by an error, by ``abort()``, by a deadline
or by the caller's cancel scope — every tool call in the transcript has exactly one
result, right after its assistant message::

    import trio
    from trio_agent import Context, UserMessage, run_agent_loop, tool
    from trio_agent.providers import OpenAIChat

    @tool
    async def read(path: str) -> str:
        '''Read a text file.

        Args:
            path: the file to read.
        '''
        return await trio.Path(path).read_text()

    async def main():
        result = await run_agent_loop(
            [UserMessage.text("What is in README.md?")],
            Context(system_prompt="Be brief.", tools=(read,)),
            OpenAIChat(model="gpt-5-mini"),   # the key from OPENAI_API_KEY
        )
        print(result.reason, result.messages[-1].text)

    trio.run(main)

Start here:

- ``run_agent_loop`` runs one run and returns its ``AgentRunResult``;
  ``open_agent_loop`` runs it in the background and hands you its events (``AgentRun``).
- ``open_agent`` opens an ``Agent``: a long-lived session with ``prompt()``, steering
  and follow-up queues, ``abort()`` and subscriptions.
- ``Tool`` or ``@tool`` define tools; ``LoopConfig`` holds limits, timeouts and hooks;
  ``Context`` is what a run starts from.
- Messages (``UserMessage``, ``AssistantMessage``, ``ToolResultMessage``,
  ``CustomMessage``) and events (``AgentEvent``, ``AssistantEvent``) are frozen values;
  ``dumps``/``loads`` and ``JsonlTranscript``/``load_transcript`` keep them on disk,
  ``check_transcript`` and ``repair`` check and mend the pairing.

Where the rest lives: ``trio_agent.providers`` (OpenAI-compatible and Anthropic HTTP
models), ``trio_agent.tools`` (read, write, edit, ls, find, grep and bash confined to one
folder), ``trio_agent.testing`` (``ScriptedModel``, property-test strategies and the run
invariants), ``trio_agent.replay`` (record a session, replay it offline),
``trio_agent.mcp`` (tools from MCP servers), ``trio_agent.telemetry`` (OpenTelemetry
spans), ``trio_agent.fleet`` (thousands of runs, resumable, locally or on Ray); the
``trio-agent`` command is ``trio_agent.cli``.

Inside, this module only re-exports names from private packages, one per layer (each
imports only from the layers before it): ``_core`` (values and rules: messages, events,
serde, tools, config, the stop-reason policy, pairing), ``_run`` (the trio driver of one
run: stream, batch, event delivery, the runner, the loop's entry points), ``_agent``
(the stateful ``Agent``) and ``_store`` (files on disk: JSONL transcripts).

``__version__`` is the installed distribution's version (from its metadata).
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from ._agent import Agent as Agent
from ._agent import AgentState as AgentState
from ._agent import open_agent as open_agent
from ._core import AfterToolCallContext as AfterToolCallContext
from ._core import AfterToolCallResult as AfterToolCallResult
from ._core import AgentBusyError as AgentBusyError
from ._core import AgentEnd as AgentEnd
from ._core import AgentEvent as AgentEvent
from ._core import AgentRunError as AgentRunError
from ._core import AgentRunResult as AgentRunResult
from ._core import AgentStart as AgentStart
from ._core import AgentUsageError as AgentUsageError
from ._core import Approve as Approve
from ._core import AssistantEvent as AssistantEvent
from ._core import AssistantMessage as AssistantMessage
from ._core import BeforeToolCallContext as BeforeToolCallContext
from ._core import BeforeToolCallResult as BeforeToolCallResult
from ._core import CallObservation as CallObservation
from ._core import CallTiming as CallTiming
from ._core import ContentBlock as ContentBlock
from ._core import Context as Context
from ._core import ContextCompacted as ContextCompacted
from ._core import CustomMessage as CustomMessage
from ._core import Defer as Defer
from ._core import Deferral as Deferral
from ._core import DeferredCall as DeferredCall
from ._core import Deny as Deny
from ._core import Done as Done
from ._core import EndReason as EndReason
from ._core import Error as Error
from ._core import Image as Image
from ._core import LoopConfig as LoopConfig
from ._core import Message as Message
from ._core import MessageEnd as MessageEnd
from ._core import MessageStart as MessageStart
from ._core import MessageUpdate as MessageUpdate
from ._core import Model as Model
from ._core import ModelOptions as ModelOptions
from ._core import ModelRequest as ModelRequest
from ._core import NextTurn as NextTurn
from ._core import Observer as Observer
from ._core import OutputError as OutputError
from ._core import OutputMode as OutputMode
from ._core import OutputRequest as OutputRequest
from ._core import OutputUpdate as OutputUpdate
from ._core import RecordMarker as RecordMarker
from ._core import RequestContext as RequestContext
from ._core import RequestObservation as RequestObservation
from ._core import Result as Result
from ._core import RunObservation as RunObservation
from ._core import Start as Start
from ._core import StopReason as StopReason
from ._core import StructuredOutput as StructuredOutput
from ._core import Text as Text
from ._core import TextDelta as TextDelta
from ._core import TextEnd as TextEnd
from ._core import TextStart as TextStart
from ._core import Thinking as Thinking
from ._core import ThinkingDelta as ThinkingDelta
from ._core import ThinkingEnd as ThinkingEnd
from ._core import ThinkingStart as ThinkingStart
from ._core import Tokens as Tokens
from ._core import Tool as Tool
from ._core import ToolCall as ToolCall
from ._core import ToolCallDelta as ToolCallDelta
from ._core import ToolCallEnd as ToolCallEnd
from ._core import ToolCallStart as ToolCallStart
from ._core import ToolContext as ToolContext
from ._core import ToolExecutionEnd as ToolExecutionEnd
from ._core import ToolExecutionStart as ToolExecutionStart
from ._core import ToolExecutionUpdate as ToolExecutionUpdate
from ._core import ToolOutcome as ToolOutcome
from ._core import ToolOutput as ToolOutput
from ._core import ToolResultMessage as ToolResultMessage
from ._core import ToolSpec as ToolSpec
from ._core import TranscriptError as TranscriptError
from ._core import TranscriptFormatError as TranscriptFormatError
from ._core import TrioAgentError as TrioAgentError
from ._core import TurnContext as TurnContext
from ._core import TurnEnd as TurnEnd
from ._core import TurnStart as TurnStart
from ._core import TurnStats as TurnStats
from ._core import Usage as Usage
from ._core import UserMessage as UserMessage
from ._core import check_transcript as check_transcript
from ._core import dumps as dumps
from ._core import json_schema as json_schema
from ._core import loads as loads
from ._core import repair as repair
from ._core import strict_json_schema as strict_json_schema
from ._core import tool as tool
from ._run import AgentRun as AgentRun
from ._run import open_agent_loop as open_agent_loop
from ._run import resume as resume
from ._run import run_agent_loop as run_agent_loop
from ._store import JsonlTranscript as JsonlTranscript
from ._store import LoadedTranscript as LoadedTranscript
from ._store import Marker as Marker
from ._store import load_transcript as load_transcript
from ._store import write_transcript as write_transcript

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
    "Approve",
    "AssistantEvent",
    "AssistantMessage",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "CallObservation",
    "CallTiming",
    "ContentBlock",
    "Context",
    "ContextCompacted",
    "CustomMessage",
    "Defer",
    "Deferral",
    "DeferredCall",
    "Deny",
    "Done",
    "EndReason",
    "Error",
    "Image",
    "JsonlTranscript",
    "LoadedTranscript",
    "LoopConfig",
    "Marker",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Model",
    "ModelOptions",
    "ModelRequest",
    "NextTurn",
    "Observer",
    "OutputError",
    "OutputMode",
    "OutputRequest",
    "OutputUpdate",
    "RecordMarker",
    "RequestContext",
    "RequestObservation",
    "Result",
    "RunObservation",
    "Start",
    "StopReason",
    "StructuredOutput",
    "Text",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "Thinking",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "Tokens",
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
    "json_schema",
    "load_transcript",
    "loads",
    "open_agent",
    "open_agent_loop",
    "repair",
    "resume",
    "run_agent_loop",
    "strict_json_schema",
    "tool",
    "write_transcript",
]

try:
    __version__: str = _version("trio-agent")
except _PackageNotFoundError:  # pragma: no cover - imported from a bare source tree
    __version__ = "0+unknown"
