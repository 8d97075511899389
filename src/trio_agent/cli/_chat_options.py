"""The options of ``trio-agent chat`` and what is built from them before the session:
the model and its API key, the transcript (a new one, or the one ``--resume`` continues),
the MCP servers, the span observer.

Nothing here talks to a model or starts a server: each function either returns what
the options name or raises :exc:`ValueError` (or :exc:`ImportError` for a missing
extra) with the message the command prints before exiting with code 2.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._core import REASONING_LEVELS as MODEL_REASONING_LEVELS
from .._core import (
    Message,
    OutputPlan,
    StructuredOutput,
    TranscriptFormatError,
    parse_json,
    repair,
    transcript_violations,
)
from .._store import LoadedTranscript, Marker, load_transcript, write_transcript
from ..providers import Anthropic, Gemini, OpenAIChat, OpenAIResponses
from ._common import holds_a_transcript, state_file

if TYPE_CHECKING:
    from .._core import ContextPolicy, Observer
    from ..mcp import McpServer

__all__ = [
    "COMPACT_POLICIES",
    "DEFAULT_URLS",
    "KEY_ENVS",
    "PROVIDERS",
    "REASONING_LEVELS",
    "SYSTEM_PROMPT",
    "ChatTranscript",
    "add_arguments",
    "api_key",
    "context_policy",
    "make_model",
    "make_observer",
    "mcp_servers",
    "output_schema",
    "positive_int",
    "session_transcript",
]

COMPACT_POLICIES = ("summarize", "elide", "recent")
"""What ``--compact`` takes (see :func:`context_policy`)."""

REASONING_LEVELS = ("off", *MODEL_REASONING_LEVELS)
"""What ``--reasoning`` takes: the levels every provider knows."""

SYSTEM_PROMPT = (
    "You are a coding agent working in the folder {folder}. Use the tools to look at and "
    "change files there. Be concise."
)
DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}
KEY_ENVS = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
PROVIDERS = tuple(DEFAULT_URLS)
"""What ``--provider`` takes: ``openai`` (chat completions, also vLLM, llama.cpp,
Ollama), ``openai-responses`` (the Responses API), ``anthropic``, ``gemini``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the command's description, epilog and options."""
    parser.description = (
        "Chat with a real model (an OpenAI-compatible server — OpenAI, vLLM, llama.cpp, "
        "Ollama —, OpenAI's Responses API, Anthropic or Google Gemini) that can use the "
        "workspace tools on a folder. Text typed "
        "during a run steers it; Ctrl-C aborts the run, a second Ctrl-C exits; Ctrl-D or "
        "/exit leaves after the current run."
    )
    parser.epilog = (
        "The API key comes from --api-key-file, else OPENAI_API_KEY (openai, "
        "openai-responses), ANTHROPIC_API_KEY or GEMINI_API_KEY; "
        "it is checked before the first prompt when --base-url is the provider's own API "
        "(a local server may need none). Calls of write, edit and bash are shown and wait "
        "for 'y' unless --yes; when stdin is not a terminal they are refused without --yes. "
        "The transcript (one JSON line per message) goes to $XDG_STATE_HOME/"
        "trio-agent/chat/ (default ~/.local/state/...) unless --transcript gives a new "
        "file; --resume PATH continues the conversation of an earlier transcript and "
        "appends to it. The last line of output is 'transcript: PATH'. Errors go to "
        "stderr. Defaults: --provider openai, --folder ., all workspace tools, the "
        "provider's own API. Exit codes: 0 normal end, 1 a run ended with a model or "
        "transport error (or the transcript could not be written), 2 bad usage (also: "
        "--transcript naming an existing transcript, or a --resume file that cannot be "
        "continued) or a missing API key, 130 left with Ctrl-C."
    )
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="openai",
        help=(
            "the API's dialect: openai (chat completions), openai-responses (the "
            "Responses API), anthropic, gemini (default: openai)"
        ),
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="the model name")
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="the API root (default: the provider's; e.g. http://localhost:8000/v1 for vLLM)",
    )
    parser.add_argument(
        "--folder", default=".", metavar="DIR", help="the tools' workspace (default: .)"
    )
    parser.add_argument("--no-tools", action="store_true", help="give the model no workspace tools")
    parser.add_argument("--no-bash", action="store_true", help="leave out the bash tool")
    parser.add_argument(
        "--api-key-file",
        metavar="FILE",
        type=Path,
        help="read the API key from FILE (its first line) instead of the environment",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="run write, edit and bash calls without asking first",
    )
    parser.add_argument("--system", metavar="TEXT", help="the system prompt")
    parser.add_argument(
        "--reasoning",
        metavar="LEVEL",
        choices=REASONING_LEVELS,
        help=f"how hard the model thinks: {', '.join(REASONING_LEVELS)} (default: the model's own)",
    )
    parser.add_argument(
        "--max-tokens",
        metavar="N",
        type=positive_int,
        help="longest reply, in tokens (a whole number above 0)",
    )
    parser.add_argument(
        "--context-window",
        metavar="N",
        type=positive_int,
        help="the model's context window in tokens, for --compact (default: known for "
        "OpenAI's and Anthropic's models; a whole number above 0)",
    )
    parser.add_argument(
        "--compact",
        choices=COMPACT_POLICIES,
        help="keep long sessions inside the context window: 'summarize' has the model "
        "summarise the older part once it passes 80%% of the window; 'elide' shortens old "
        "tool outputs, then leaves out the oldest turns that do not fit; 'recent' sends "
        "the newest 20 turns that fit. A request the provider refuses as too long is "
        "compacted harder and sent again once. Default: no compaction",
    )
    parser.add_argument(
        "--transcript",
        metavar="PATH",
        type=Path,
        help="write the JSONL transcript to this new file (an existing transcript is "
        "refused: continue it with --resume)",
    )
    parser.add_argument(
        "--resume",
        metavar="PATH",
        type=Path,
        help="continue the conversation of the transcript PATH (of an earlier chat): "
        "its messages are the history, and the session appends to it. A torn last line "
        "is dropped and tool calls left without a result get an aborted one first",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        help="record every request and streamed reply to the cassette FILE (replaced), "
        "for 'trio-agent replay FILE'; no API key is written",
    )
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="'CMD ARGS'",
        help=(
            "also give the model the tools of this MCP server, run as a subprocess over "
            "stdio (repeatable; needs 'trio-agent[mcp]'). 'NAME=CMD ARGS' prefixes its tool "
            "names with NAME__. Its stderr goes to the transcript's path + .mcp.log"
        ),
    )
    parser.add_argument(
        "--mcp-url",
        action="append",
        default=[],
        metavar="URL",
        help="also give the model the tools of the MCP server at this streamable-HTTP URL "
        "(repeatable; 'NAME=URL' prefixes its tool names)",
    )
    parser.add_argument(
        "--output-schema",
        type=Path,
        metavar="FILE.json",
        help="ask every prompt for a JSON value matching this JSON Schema (structured "
        "output, in the provider's best mode: a strict response_format on "
        "OpenAI-compatible servers, a final-answer tool on Anthropic); the validated "
        "value is printed as JSON. An answer still invalid after 2 retries is an error "
        "on stderr (exit 1)",
    )
    parser.add_argument(
        "--otel-console",
        action="store_true",
        help="print an OpenTelemetry span per run, model request and tool call on stderr "
        "(needs 'trio-agent[otel]' and opentelemetry-sdk). Without it, spans go where "
        "'opentelemetry-instrument' set up from the OTEL_* variables, if it did",
    )


def output_schema(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--output-schema``'s JSON Schema, read and checked (None without it).

    Raises:
        ValueError: the file cannot be read, is not JSON, or is not a JSON Schema
            object; the message says which.
    """
    path: Path | None = args.output_schema
    if path is None:
        return None
    try:
        schema = parse_json(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read --output-schema {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"--output-schema {path} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise ValueError(f"--output-schema {path} must hold a JSON object (a JSON Schema)")
    try:
        OutputPlan(StructuredOutput(schema))
    except ValueError as exc:
        raise ValueError(f"--output-schema {path}: {exc}") from None
    return schema


def positive_int(text: str) -> int:
    """An option's value as a whole number above 0 (an ``argparse`` ``type``).

    Raises:
        argparse.ArgumentTypeError: anything else; argparse prints it with the usage
            and exits with code 2.
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, not {text!r}")
    return value


@attrs.frozen
class ChatTranscript:
    """Where a chat's messages go, and what it starts from (see
    :func:`session_transcript`)."""

    path: Path
    """The transcript the session appends to."""
    history: tuple[Message, ...] = ()
    """The messages of the conversation ``--resume`` continues (empty for a new one)."""
    notes: tuple[str, ...] = ()
    """What was done to the resumed transcript, one line each (shown at the start)."""
    markers: tuple[Marker, ...] = ()
    """The marker lines of the resumed transcript (its compactions)."""


def session_transcript(args: argparse.Namespace) -> ChatTranscript:
    """The transcript of the session: ``--resume``'s (loaded, and repaired on disk if
    it needs it), else ``--transcript`` (a new file), else a new file in the state
    folder. Creates the folder of a new transcript. Blocks (file I/O).

    Resuming loads the file as :func:`~trio_agent.load_transcript` does, then
    :func:`~trio_agent.repair` gives every tool call without a result an aborted one;
    when a torn last line was dropped or results were added, the file is rewritten
    (atomically) before the session appends to it.

    Raises:
        ValueError: ``--transcript`` names a file that holds a transcript already (the
            message suggests ``--resume``); ``--resume`` names no file, a file that does
            not load, one whose pairing repair cannot fix, or ``--transcript`` names
            another file too.
        OSError: the folder cannot be made, or the repaired transcript cannot be
            written (``AgentUsageError`` when another session has it open).
    """
    chosen: Path | None = args.transcript
    resume: Path | None = getattr(args, "resume", None)
    if resume is not None:
        if chosen is not None and chosen.resolve() != resume.resolve():
            raise ValueError(
                "--resume PATH is the transcript the session appends to: leave out "
                "--transcript (or give both the same path)"
            )
        return _resume(resume)
    if chosen is None:
        chosen = state_file("chat")
    elif holds_a_transcript(chosen):
        raise ValueError(
            f"the transcript {chosen} exists already: continue that conversation with "
            f"--resume {chosen}, or give --transcript a new path"
        )
    chosen.parent.mkdir(parents=True, exist_ok=True)
    return ChatTranscript(chosen)


def _resume(path: Path) -> ChatTranscript:
    if not path.is_file():
        raise ValueError(f"--resume: no transcript at {path}")
    try:
        loaded = load_transcript(path)
    except TranscriptFormatError as exc:
        raise ValueError(f"--resume: cannot continue {path}: {exc}") from None
    except OSError as exc:
        raise ValueError(f"--resume: cannot read {path}: {exc.strerror or exc}") from None
    try:
        waiting = loaded.waiting
    except TranscriptFormatError as exc:
        raise ValueError(f"--resume: cannot continue {path}: {exc}") from None
    if waiting:
        # A chat prompt after them would leave them unanswered: they are answered first.
        raise ValueError(
            f"--resume: {path} ends with {len(waiting)} call(s) waiting for a decision "
            f"({', '.join(sorted(waiting))}): answer them first with 'trio-agent resume "
            f"{path} --approve ID --deny ID'"
        )
    history = repair(loaded.messages)
    problems = transcript_violations(history)
    if problems:
        raise ValueError(
            f"--resume: cannot continue {path}: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + f"; 'trio-agent check {path}' lists them"
        )
    notes: list[str] = []
    if not loaded.whole:
        notes.append(f"its torn last line (line {loaded.torn_line}) was dropped")
    added = len(history) - len(loaded.messages)
    if added:
        notes.append(
            f"{added} tool call{'s' if added != 1 else ''} without a result got an aborted one"
        )
    if notes:
        write_transcript(path, history, markers=loaded.markers)
    return ChatTranscript(path, history, tuple(notes), loaded.markers)


def context_policy(args: argparse.Namespace, session: ChatTranscript) -> ContextPolicy | None:
    """The context policy ``--compact`` names (None without it): ``summarize`` a
    ``Summarize`` with the session's model, taking up the summary of a resumed
    transcript; ``elide`` old tool outputs elided, then the oldest turns that do not
    fit left out; ``recent`` the newest 20 turns that fit."""
    from ..context import ElideToolOutputs, KeepRecent, Summarize, compose

    name = getattr(args, "compact", None)
    if name is None:
        return None
    if name == "recent":
        return KeepRecent(turns=20)
    if name == "elide":
        return compose(ElideToolOutputs(older_than=2, keep_chars=500), KeepRecent(turns=10_000))
    policy = Summarize()
    policy.resume(LoadedTranscript(messages=session.history, markers=session.markers))
    return policy


def api_key(args: argparse.Namespace) -> str | None:
    """The key from ``--api-key-file`` (its first line), else from the provider's
    environment variable; None when neither gives one.

    Raises:
        ValueError: the provider's own API needs a key and none is set, or the key
            file cannot be read; the message names the variable and the flag.
    """
    env = KEY_ENVS[args.provider]
    if args.api_key_file is not None:
        try:
            text = args.api_key_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the API key file: {exc}") from None
        key: str | None = (text.splitlines() or [""])[0].strip()
    else:
        key = (os.environ.get(env) or "").strip()
    if not key:
        key = None
    if key is None and args.base_url is None:
        raise ValueError(
            f"no API key for {DEFAULT_URLS[args.provider]}: set {env} or pass "
            "--api-key-file FILE (a local server: --base-url URL)"
        )
    return key


def make_model(args: argparse.Namespace) -> OpenAIChat | OpenAIResponses | Anthropic | Gemini:
    """The model the arguments name. Raises ValueError for a bad ``--base-url`` or a
    missing key (see :func:`api_key`)."""
    base_url = args.base_url or DEFAULT_URLS[args.provider]
    key = api_key(args)
    if args.provider == "openai":
        return OpenAIChat(args.model, base_url=base_url, api_key=key)
    if args.provider == "openai-responses":
        return OpenAIResponses(args.model, base_url=base_url, api_key=key)
    if args.provider == "gemini":
        return Gemini(args.model, base_url=base_url, api_key=key)
    return Anthropic(args.model, base_url=base_url, api_key=key)


_PREFIXED = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)=(.*)", re.S)


def mcp_servers(args: argparse.Namespace, transcript: Path) -> list[McpServer]:
    """The ``--mcp`` and ``--mcp-url`` servers. Raises ValueError for a bad one, and
    ImportError when the MCP extra is not installed (only when one is asked for)."""
    if not args.mcp and not args.mcp_url:
        return []
    from ..mcp import StdioServer, StreamableHttpServer

    servers: list[McpServer] = []
    stderr = f"{transcript}.mcp.log"
    for line in args.mcp:
        prefixed = _PREFIXED.fullmatch(line.strip())
        prefix, command = prefixed.groups() if prefixed else (None, line)
        servers.append(StdioServer.from_command_line(command, prefix=prefix, stderr=stderr))
    for url in args.mcp_url:
        prefixed = _PREFIXED.fullmatch(url.strip())
        prefix, url = prefixed.groups() if prefixed else (None, url)
        servers.append(StreamableHttpServer(url.strip(), prefix=prefix))
    return servers


def make_observer(console: bool) -> Observer | None:
    """Spans for the session: on the console, or where ``OTEL_*`` set up (see
    ``cli/_telemetry``); None without OpenTelemetry installed."""
    try:
        from ._telemetry import command_line_observer
    except ImportError:
        if console:
            raise ImportError(
                "--otel-console needs OpenTelemetry: pip install 'trio-agent[otel]' "
                "opentelemetry-sdk"
            ) from None
        return None
    return command_line_observer(console, agent_name="trio-agent chat")
