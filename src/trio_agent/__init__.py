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

from ._agent._agent import Agent as Agent
from ._agent._agent import AgentState as AgentState
from ._agent._agent import open_agent as open_agent
from ._core._config import AfterToolCallContext as AfterToolCallContext
from ._core._config import AfterToolCallResult as AfterToolCallResult
from ._core._config import BeforeToolCallContext as BeforeToolCallContext
from ._core._config import BeforeToolCallResult as BeforeToolCallResult
from ._core._config import Context as Context
from ._core._config import LoopConfig as LoopConfig
from ._core._config import NextTurn as NextTurn
from ._core._config import TurnContext as TurnContext
from ._core._errors import AgentBusyError as AgentBusyError
from ._core._errors import AgentRunError as AgentRunError
from ._core._errors import AgentUsageError as AgentUsageError
from ._core._errors import TranscriptError as TranscriptError
from ._core._errors import TranscriptFormatError as TranscriptFormatError
from ._core._errors import TrioAgentError as TrioAgentError
from ._core._events import AgentEnd as AgentEnd
from ._core._events import AgentEvent as AgentEvent
from ._core._events import AgentRunResult as AgentRunResult
from ._core._events import AgentStart as AgentStart
from ._core._events import AssistantEvent as AssistantEvent
from ._core._events import CallTiming as CallTiming
from ._core._events import Done as Done
from ._core._events import EndReason as EndReason
from ._core._events import Error as Error
from ._core._events import MessageEnd as MessageEnd
from ._core._events import MessageStart as MessageStart
from ._core._events import MessageUpdate as MessageUpdate
from ._core._events import Start as Start
from ._core._events import TextDelta as TextDelta
from ._core._events import TextEnd as TextEnd
from ._core._events import TextStart as TextStart
from ._core._events import ThinkingDelta as ThinkingDelta
from ._core._events import ThinkingEnd as ThinkingEnd
from ._core._events import ThinkingStart as ThinkingStart
from ._core._events import ToolCallDelta as ToolCallDelta
from ._core._events import ToolCallEnd as ToolCallEnd
from ._core._events import ToolCallStart as ToolCallStart
from ._core._events import ToolExecutionEnd as ToolExecutionEnd
from ._core._events import ToolExecutionStart as ToolExecutionStart
from ._core._events import ToolExecutionUpdate as ToolExecutionUpdate
from ._core._events import ToolOutcome as ToolOutcome
from ._core._events import TurnEnd as TurnEnd
from ._core._events import TurnStart as TurnStart
from ._core._events import TurnStats as TurnStats
from ._core._messages import AssistantMessage as AssistantMessage
from ._core._messages import ContentBlock as ContentBlock
from ._core._messages import CustomMessage as CustomMessage
from ._core._messages import Image as Image
from ._core._messages import Message as Message
from ._core._messages import StopReason as StopReason
from ._core._messages import Text as Text
from ._core._messages import Thinking as Thinking
from ._core._messages import ToolCall as ToolCall
from ._core._messages import ToolResultMessage as ToolResultMessage
from ._core._messages import Usage as Usage
from ._core._messages import UserMessage as UserMessage
from ._core._model import Model as Model
from ._core._model import ModelOptions as ModelOptions
from ._core._model import ModelRequest as ModelRequest
from ._core._model import ToolSpec as ToolSpec
from ._core._observer import CallObservation as CallObservation
from ._core._observer import Observer as Observer
from ._core._observer import RequestObservation as RequestObservation
from ._core._observer import RunObservation as RunObservation
from ._core._pairing import check_transcript as check_transcript
from ._core._pairing import repair as repair
from ._core._serde import dumps as dumps
from ._core._serde import loads as loads
from ._core._tool_decorator import tool as tool
from ._core._tools import Tool as Tool
from ._core._tools import ToolContext as ToolContext
from ._core._tools import ToolOutput as ToolOutput
from ._run._loop import AgentRun as AgentRun
from ._run._loop import open_agent_loop as open_agent_loop
from ._run._loop import run_agent_loop as run_agent_loop
from ._store._jsonl import JsonlTranscript as JsonlTranscript
from ._store._jsonl import LoadedTranscript as LoadedTranscript
from ._store._jsonl import load_transcript as load_transcript
from ._store._jsonl import write_transcript as write_transcript

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
