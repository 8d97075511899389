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

Inside, this module only re-exports names from private modules, in layers (each imports
only from its own layer or those before it): values (``_messages``, ``_events``,
``_serde``, ``_model``, ``_tools``, ``_config``...), rules (``_arguments``,
``_conversion``, ``_policy``...), the loop (``_stream``, ``_batch``, ``_runner``,
``_loop``), the agent (``_queues``, ``_fanout``, ``_agent``...) and files on disk
(``_pairing``, ``_jsonl``).

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
