"""trio_agent.mcp against real MCP servers (tests/kit/programs/mcp_server.py, the SDK's
server class): one over stdio per test, one over streamable HTTP on 127.0.0.1 shared by
the module.

Real clock throughout (subprocesses and sockets), each wait under ``trio.fail_after``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kit.loop import reply, sleeper
from tests.kit.mcp import (
    SERVER,
    calls,
    ends,
    http_server_process,
    log_lines,
    stdio_server,
    wait_for_line,
    wait_gone,
)
from tests.kit.processes import alive, children_of
from trio_agent import (
    Approve,
    Context,
    Image,
    LoopConfig,
    Text,
    ToolCall,
    ToolContext,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultMessage,
    TurnEnd,
    UserMessage,
    check_transcript,
    open_agent_loop,
    resume,
    run_agent_loop,
)
from trio_agent.mcp import (
    McpConnection,
    McpServerError,
    McpTools,
    StdioServer,
    StreamableHttpServer,
    open_mcp_tools,
)
from trio_agent.mcp._names import model_names
from trio_agent.mcp._stdio import _Noise, _read_stdout
from trio_agent.testing import ScriptedModel, assert_run_invariants

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from trio_agent import AgentEvent, AgentRun, AgentRunResult, Model, Tool

pytestmark_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inspects processes through /proc"
)
# A call cancelled over streamable HTTP leaves the SDK's SSE reader (httpx2/httpcore2
# async generators) to the garbage collector, which trio reports as a ResourceWarning
# (hidden by default outside tests). It is the SDK's, not ours: the call itself is
# cancelled on the server, as the tests check.
pytestmark = [
    pytestmark_linux,
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
]

# As the model sees them: the server's "dotted.name" has its dot replaced.
TOOL_NAMES = [
    "echo",
    "add",
    "slow",
    "fail",
    "picture",
    "count",
    "dotted_name",
    "crash",
    "big",
    "table",
    "shout",
    "die",
    "spawn",
    "getenv",
    "pid",
    "grow",
    "shape",
    "order",
]
GUARD = 60  # seconds: far above any test's time; a hang fails instead of stalling


async def _ignore(_update: Any) -> None:
    await trio.lowlevel.checkpoint()


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One HTTP test server for the module: (url, the log its ``slow`` tool writes)."""
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    with http_server_process(log) as (url, _proc):
        yield url, log


async def run(
    tools: Sequence[Tool], model: Model, config: LoopConfig | None = None
) -> tuple[AgentRunResult, list[AgentEvent], Context]:
    events: list[AgentEvent] = []
    context = Context(tools=tuple(tools))
    result = await run_agent_loop(
        [UserMessage.text("go")], context, model, config, on_event=events.append
    )
    return result, events, context


def only_text(result: Any) -> str:
    if isinstance(result.content, str):
        return result.content
    return "".join(b.text for b in result.content if isinstance(b, Text))


async def server_pid(mcp: Any) -> int:
    return int(only_text(await mcp.servers[0].call("pid", {})))


async def cancel_paths(mcp: McpTools, log: Path, tag: str) -> None:
    """An abort, an interrupt and ``tool_timeout`` each cancel a running call on the server."""
    for how in ("abort", "interrupt"):
        t = f"{tag}-{how}"
        model = ScriptedModel([calls(("c", "slow", {"seconds": 30, "tag": t})), reply()])
        async with open_agent_loop([UserMessage.text("go")], Context(tools=mcp.tools), model) as r:
            async for event in r.events:
                if isinstance(event, ToolExecutionStart):
                    await wait_for_line(log, f"started {t}")
                    if how == "abort":
                        r.abort("stop")
                    else:
                        assert r.interrupt()
        assert r.result is not None
        assert r.result.reason == ("aborted" if how == "abort" else "stop")
        await wait_for_line(log, f"cancelled {t}")
    model = ScriptedModel([calls(("c", "slow", {"seconds": 30, "tag": f"{tag}-tt"})), reply()])
    result, events, _ = await run(mcp.tools, model, LoopConfig(tool_timeout=0.5))
    assert ends(events)["c"].outcome == "timed_out"
    assert result.reason == "stop"
    await wait_for_line(log, f"cancelled {tag}-tt")


# --- stdio ------------------------------------------------------------------------------


async def test_stdio_tools_in_a_run(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(tmp_path / "s.log"), prefix="t") as mcp:
            pid = await server_pid(mcp)
            tools = {t.name: t for t in mcp.tools}
            assert list(tools) == [f"t__{n}" for n in TOOL_NAMES]
            assert tools["t__add"].description == "Add two integers."
            assert tools["t__add"].parameters["required"] == ["a", "b"]
            model = ScriptedModel(
                [
                    calls(
                        ("a", "t__add", {"a": 2, "b": 3}),
                        ("f", "t__fail", {"message": "no such branch"}),
                        ("p", "t__picture", {}),
                        ("c", "t__count", {"steps": 3}),
                        ("bad", "t__add", {"a": "two"}),
                        ("d", "t__dotted_name", {}),
                    ),
                    reply(),
                ]
            )
            result, events, context = await run(mcp.tools, model)
            assert alive(pid)
        assert not alive(pid)
    end = ends(events)
    assert end["a"].result.content == (Text(text="5"),)
    # The structured content ({"result": 5}) is kept beside the text, for programs.
    assert end["a"].result.structured_content == {"result": 5}
    assert end["a"].result.details is None
    assert not end["a"].is_error
    assert end["f"].is_error
    assert "no such branch" in only_text(end["f"].result)
    (picture,) = end["p"].result.content
    assert isinstance(picture, Image)
    assert picture.mime_type == "image/png"
    assert only_text(end["c"].result) == "counted 3"
    updates = [e.partial for e in events if isinstance(e, ToolExecutionUpdate)]
    assert updates == [
        {"progress": float(i), "total": 3.0, "message": f"step {i}"} for i in (1, 2, 3)
    ]
    # Our argument gate applies: the server's schema rejects the call before it is sent.
    assert end["bad"].outcome == "invalid_arguments"
    assert only_text(end["d"].result) == "dotted ok"
    assert result.reason == "stop"
    assert_run_invariants(result, events, model.requests, context)


async def test_stdio_list_changed_refreshes_the_tools(tmp_path: Path) -> None:
    # The block is left by an exception at the end: it propagates as it is (not wrapped
    # in a group), and the server process is gone.
    with trio.fail_after(GUARD), pytest.raises(KeyError, match="boom"):
        async with open_mcp_tools(stdio_server(tmp_path / "s.log", prefix="t")) as mcp:
            pid = await server_pid(mcp)
            server = mcp.servers[0]
            assert server.tools_version == 1
            assert "t__fresh" not in [t.name for t in mcp.tools]
            assert only_text(await server.call("grow", {"name": "fresh"})) == "added fresh"
            while server.tools_version < 2:  # noqa: ASYNC110 - polls a counter the host bumps
                await trio.sleep(0.01)
            fresh = {t.name: t for t in mcp.tools}["t__fresh"]
            assert fresh.description == "added at run time: fresh"
            model = ScriptedModel([calls(("x", "t__fresh", {"text": "hi"})), reply()])
            result, events, _ = await run(mcp.tools, model)
            raise KeyError("boom")
    assert only_text(ends(events)["x"].result) == "hi"
    assert result.reason == "stop"
    assert not alive(pid)


async def test_handshake_era_protocol_calls_cancels_and_list_changed(tmp_path: Path) -> None:
    # Most servers in use speak a protocol older than 2026-07-28: changes arrive as
    # notifications, not on a `subscriptions/listen` stream.
    log = tmp_path / "s.log"
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            server = McpConnection(server=stdio_server(log), prefix="old", mode="legacy")
            await nursery.start(server._host)
            assert "old__echo" in [t.name for t in server.tools]
            assert only_text(await server.call("add", {"a": 1, "b": 2})) == "3"
            with trio.move_on_after(0.5):
                await server.call("slow", {"seconds": 30, "tag": "old"})
            await wait_for_line(log, "cancelled old")
            await server.call("grow", {"name": "late"})
            while server.tools_version < 2:  # noqa: ASYNC110 - polls a counter the host bumps
                await trio.sleep(0.01)
            assert "old__late" in [t.name for t in server.tools]
            server._close()
    assert not server.is_running


async def test_stdio_abort_interrupt_and_timeouts_cancel_the_call_on_the_server(
    tmp_path: Path,
) -> None:
    log = tmp_path / "s.log"
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(log, call_timeout=1.0)) as mcp:
            await cancel_paths(mcp, log, "stdio")
            # a server that does not answer within call_timeout: an error naming it
            model = ScriptedModel([calls(("c", "slow", {"seconds": 30, "tag": "ct"})), reply()])
            result, events, _ = await run(mcp.tools, model)
            end = ends(events)["c"]
            assert end.is_error
            assert only_text(end.result).startswith("MCP server python")
            assert "did not answer the call to slow within 1s" in only_text(end.result)
            assert result.reason == "stop"
            await wait_for_line(log, "cancelled ct")
            # the session survives all three
            assert only_text(await mcp.servers[0].call("echo", {"text": "still here"})) == (
                "still here"
            )
    assert [line for line in log_lines(log) if line.startswith("finished")] == []


async def killed_mid_call(
    mcp: McpTools, log: Path, kill: Callable[[], object], other: str | None = None
) -> None:
    """Kill the first server while a call of a batch runs: that call gets an error result
    naming the server, the local call of the batch (and the call to the ``other`` tool of
    another server, if given) is unharmed, a later call gets an error at once, and the
    run goes on to its end, paired."""
    server = mcp.servers[0]

    async def kill_when_started() -> None:
        await wait_for_line(log, "started k")
        kill()

    batch = [("k", "slow", {"seconds": 30, "tag": "k"}), ("l", "local", {"s": 0.5})]
    if other is not None:
        batch.append(("o", other, {"seconds": 0.5, "tag": "other"}))
    model = ScriptedModel(
        [
            calls(*batch),
            calls(("after", "echo", {"text": "x"})),
            reply("carried on"),
        ]
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill_when_started)
        result, events, context = await run([*mcp.tools, sleeper("local", 0.05)], model)
    assert not server.is_running
    assert server.error is not None
    end = ends(events)
    assert end["k"].is_error
    assert only_text(end["k"].result).startswith(f"MCP server {server.name}: ")
    assert not end["l"].is_error
    if other is not None:
        assert only_text(end["o"].result) == "slept 0.5"
    assert only_text(end["after"].result).startswith(f"MCP server {server.name} is not running")
    assert result.reason == "stop"
    assert_run_invariants(result, events, model.requests, context)


async def test_stdio_server_killed_mid_call(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(log, name="victim")) as mcp:
            pid = await server_pid(mcp)
            await killed_mid_call(mcp, log, lambda: os.kill(pid, signal.SIGKILL))
    assert not alive(pid)


async def test_no_server_process_outlives_the_block(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    before = children_of(os.getpid())  # the module's HTTP server may be running
    # Left by a cancel while a call runs.
    with trio.fail_after(GUARD):
        with trio.move_on_after(GUARD / 2) as scope:
            async with open_mcp_tools(stdio_server(log)) as mcp:
                pid = await server_pid(mcp)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(mcp.servers[0].call, "slow", {"seconds": 30, "tag": "c"})
                    await wait_for_line(log, "started c")
                    scope.cancel()
        assert scope.cancelled_caught
        assert not alive(pid)
        # Cancelled while the server starts.
        with trio.move_on_after(0.3):
            async with open_mcp_tools(stdio_server(log)):
                raise AssertionError("unreachable: the server takes longer to start")
        assert children_of(os.getpid()) == before


async def test_a_server_that_does_not_start_is_a_clear_error(tmp_path: Path) -> None:
    before = children_of(os.getpid())  # the module's HTTP server may be running
    with trio.fail_after(GUARD):
        with pytest.raises(McpServerError, match="MCP server quitter did not start"):
            async with open_mcp_tools(StdioServer(sys.executable, "-c", "pass", name="quitter")):
                pass
        with pytest.raises(McpServerError, match=r"did not start: .*No such file"):
            async with open_mcp_tools(StdioServer(str(tmp_path / "missing"))):
                pass
        mute = StdioServer(sys.executable, "-c", "import time; time.sleep(60)", start_timeout=0.5)
        with pytest.raises(McpServerError, match=r"did not start within 0\.5s"):
            async with open_mcp_tools(mute):
                pass
        # One server fails: the others, started or starting, are stopped too.
        quitter = StdioServer(sys.executable, "-c", "pass", name="quitter")
        with pytest.raises(McpServerError, match="MCP server quitter did not start"):
            async with open_mcp_tools(stdio_server(tmp_path / "s.log"), quitter):
                pass
        assert children_of(os.getpid()) == before


async def test_what_a_server_started_goes_with_it(tmp_path: Path) -> None:
    # A server that exits when its stdin closes, leaving a child it started behind: the
    # child is in the server's process group, which is killed when the block is left.
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(tmp_path / "s.log")) as mcp:
            child = int(only_text(await mcp.servers[0].call("spawn", {})))
            assert alive(child)
    # SIGKILL was sent when the block was left; it lands at once.
    await wait_gone(child, seconds=5)


def test_ctrl_c_leaves_no_server_process(tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import sys, trio\n"
        "from trio_agent.mcp import StdioServer, open_mcp_tools\n"
        "async def main():\n"
        f"    server = StdioServer(sys.executable, {SERVER!r}, 'stdio')\n"
        "    async with open_mcp_tools(server) as mcp:\n"
        "        pid = (await mcp.servers[0].call('pid', {})).content[0].text\n"
        "        print(pid, flush=True)\n"
        "        await mcp.servers[0].call('slow', {'seconds': 60})\n"
        "trio.run(main)\n",
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the driver prints the pid within seconds
        pid = int(line)
        assert alive(pid)
        time.sleep(0.2)  # the call is under way
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "KeyboardInterrupt" in err
    assert not alive(pid)


# --- streamable HTTP ----------------------------------------------------------------------


async def test_http_concurrent_calls_in_one_batch(http: tuple[str, Path]) -> None:
    url, log = http
    with trio.fail_after(GUARD):
        async with open_mcp_tools(StreamableHttpServer(url, prefix="h")) as mcp:
            model = ScriptedModel(
                [
                    calls(
                        ("1", "h__slow", {"seconds": 1.0, "tag": "conc1"}),
                        ("2", "h__slow", {"seconds": 1.0, "tag": "conc2"}),
                        ("3", "local", {}),
                    ),
                    reply(),
                ]
            )
            result, events, context = await run([*mcp.tools, sleeper("local", 1.0)], model)
    (stats,) = [e.stats for e in events if isinstance(e, TurnEnd) and e.tool_results]
    assert stats.peak_concurrency == 3
    # Each call took about a second; the batch took about as long as the slowest one.
    assert stats.critical_path >= 1.0
    assert stats.wall_time < stats.total_call_time / 2
    lines = log_lines(log)
    assert lines.index("started conc2") < lines.index("finished conc1")
    assert lines.index("started conc1") < lines.index("finished conc2")
    assert_run_invariants(result, events, model.requests, context)


async def test_http_abort_interrupt_and_tool_timeout_reach_the_server(
    http: tuple[str, Path],
) -> None:
    url, log = http
    with trio.fail_after(GUARD):
        async with open_mcp_tools(StreamableHttpServer(url)) as mcp:
            await cancel_paths(mcp, log, "http")
            assert only_text(await mcp.servers[0].call("add", {"a": 1, "b": 1})) == "2"


async def test_http_prefix_and_filters(http: tuple[str, Path]) -> None:
    url, _ = http
    with trio.fail_after(GUARD):
        async with open_mcp_tools(
            StreamableHttpServer(url, prefix="a", allow=["echo", "add", "crash"], block="crash"),
            StreamableHttpServer(url, prefix="b"),
            block=["crash", "grow"],
        ) as mcp:
            names = [t.name for t in mcp.tools]
            assert [s.name for s in mcp.servers] == ["a", "b"]
        assert names == ["a__echo", "a__add"] + [
            f"b__{n}" for n in TOOL_NAMES if n not in ("crash", "grow")
        ]
        with pytest.raises(McpServerError, match="both offer a tool named 'echo'"):
            async with open_mcp_tools(StreamableHttpServer(url), StreamableHttpServer(url)):
                pass


async def test_http_server_killed_mid_call(tmp_path: Path, http: tuple[str, Path]) -> None:
    log = tmp_path / "k.log"
    with http_server_process(log) as (url, proc), trio.fail_after(GUARD):
        async with open_mcp_tools(
            StreamableHttpServer(url, name="remote"), StreamableHttpServer(http[0], prefix="other")
        ) as mcp:
            await killed_mid_call(mcp, log, proc.kill, other="other__slow")
            assert mcp.servers[1].is_running


async def test_invariants_with_mcp_and_local_tools_under_random_aborts(
    http: tuple[str, Path],
) -> None:
    url, _ = http
    rng = random.Random(18)
    reasons: list[str] = []
    with trio.fail_after(GUARD):
        async with open_mcp_tools(StreamableHttpServer(url, prefix="m")) as mcp:
            for n in range(8):
                model = ScriptedModel(
                    [
                        calls(
                            ("s", "m__slow", {"seconds": rng.uniform(0, 0.2), "tag": f"inv{n}"}),
                            ("e", "m__echo", {"text": "hi"}),
                            ("f", "m__fail", {"message": "bad"}),
                            ("l", "local", {"s": rng.uniform(0, 0.2)}),
                        ),
                        calls(("p", "m__count", {"steps": 2}), ("a", "m__add", {"a": 1, "b": 2})),
                        reply(),
                    ]
                )
                context = Context(tools=(*mcp.tools, sleeper("local", 0.1)))
                abort_at = rng.uniform(0, 0.4)
                events: list[AgentEvent] = []
                requests_at_abort: int | None = None
                async with open_agent_loop([UserMessage.text("go")], context, model) as r:

                    async def aborter(run: AgentRun, model: ScriptedModel, at: float) -> None:
                        nonlocal requests_at_abort
                        await trio.sleep(at)
                        if run.result is None:
                            requests_at_abort = len(model.requests)
                            run.abort("random abort")

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(aborter, r, model, abort_at)
                        async for event in r.events:
                            events.append(event)
                        nursery.cancel_scope.cancel()
                assert r.result is not None
                reasons.append(r.result.reason)
                assert_run_invariants(
                    r.result,
                    events,
                    model.requests,
                    context,
                    requests_at_abort=requests_at_abort if r.result.reason == "aborted" else None,
                )
            assert mcp.servers[0].is_running
    # Some runs were cut mid-way (the early abort times fall inside the first batch).
    assert "aborted" in reasons


def test_the_core_and_the_cli_never_import_mcp() -> None:
    code = (
        "import sys, trio_agent, trio_agent.cli, trio_agent.tools, trio_agent.testing\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_example_program_runs_from_a_copy_anywhere(tmp_path: Path) -> None:
    # A user copies the example out of the checkout and runs it from another folder:
    # it needs nothing but itself (its server is written inline).
    example = Path(__file__).resolve().parent.parent.parent / "examples" / "mcp_tools.py"
    (tmp_path / "mine").mkdir()
    (tmp_path / "elsewhere").mkdir()
    copy = tmp_path / "mine" / "agent.py"
    copy.write_text(example.read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path / "elsewhere",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("MCP tools: srv__echo, srv__add, ")
    assert "srv__crash" not in lines[0]
    assert lines[1:] == ["srv__add -> 42", "answer: 2 + 40 = 42"]


@pytest.mark.parametrize(
    ("build", "says"),
    [
        pytest.param(
            lambda: StdioServer(sys.executable, prefix="git server"),
            r"prefix must be letters, digits, '_' and '-' only .*not 'git server'",
            id="stdio-prefix-with-a-space",
        ),
        pytest.param(
            lambda: StreamableHttpServer("http://127.0.0.1:1/mcp", prefix="fs.local"),
            r"prefix must be letters, digits, '_' and '-' only .*not 'fs\.local'",
            id="http-prefix-with-a-dot",
        ),
        pytest.param(
            lambda: StdioServer(sys.executable, call_timeout=0),
            r"StdioServer\.call_timeout must be a number of seconds, above zero, or None; not 0",
            id="call-timeout-zero",
        ),
        pytest.param(
            lambda: StreamableHttpServer("http://127.0.0.1:1/mcp", start_timeout=-1),
            r"StreamableHttpServer\.start_timeout must be a number of seconds, above zero; not -1",
            id="start-timeout-negative",
        ),
        pytest.param(
            lambda: StdioServer(sys.executable, prefix="p" * 41),
            r"prefix must be at most 40 characters \(tool names are at most 64\), not 41",
            id="prefix-too-long",
        ),
        pytest.param(
            lambda: open_mcp_tools(StdioServer(sys.executable), prefix="my tools"),
            r"prefix must be letters, digits, '_' and '-' only .*not 'my tools'",
            id="open-mcp-tools-prefix",
        ),
        pytest.param(
            lambda: StdioServer(sys.executable, max_result_chars=0),
            r"StdioServer\.max_result_chars must be a number of characters above zero, or "
            r"None; not 0",
            id="max-result-chars-zero",
        ),
        pytest.param(
            lambda: StreamableHttpServer("http://127.0.0.1:1/mcp", max_result_chars=1e6),  # type: ignore[arg-type]
            r"StreamableHttpServer\.max_result_chars must be .*; not 1000000\.0",
            id="max-result-chars-float",
        ),
    ],
)
def test_a_server_description_that_cannot_work_is_refused_when_built(
    build: Callable[[], object], says: str
) -> None:
    # A prefix begins every tool name of the server: one the model APIs refuse would
    # fail every request, so it is refused here, before any process starts.
    with pytest.raises(ValueError, match=says):
        build()
    assert StdioServer(sys.executable, prefix="git-2", call_timeout=None).prefix == "git-2"


# --- results: a bound on their size, details that do not repeat them -------------------


async def test_a_huge_result_is_cut_and_the_connection_stays_usable(tmp_path: Path) -> None:
    # 20 MB on one JSON-RPC line: read in linear time (the SDK's own reader took about
    # 10 s of CPU for this), cut to the default 50,000 characters, and the connection
    # answers the next call.
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(tmp_path / "s.log", call_timeout=30)) as mcp:
            server = mcp.servers[0]
            model = ScriptedModel([calls(("b", "big", {"chars": 20_000_000})), reply()])
            result, events, context = await run(mcp.tools, model)
            assert only_text(await server.call("echo", {"text": "after"})) == "after"
    end = ends(events)["b"]
    assert not end.is_error
    kept, note = end.result.content
    assert kept == Text(text="x" * 50_000)
    assert note.text == "\n\n[result cut: showing the first 50,000 of 20,000,000 characters]"
    assert end.result.details is None
    assert_run_invariants(result, events, model.requests, context)
    assert server.server.max_result_chars == 50_000  # the default, as the bash tool's


async def test_max_result_chars_is_per_server(http: tuple[str, Path]) -> None:
    url, _ = http
    with trio.fail_after(GUARD):
        async with open_mcp_tools(
            StreamableHttpServer(url, prefix="small", max_result_chars=10),
            StreamableHttpServer(url, prefix="whole", max_result_chars=None),
        ) as mcp:
            small, whole = mcp.servers
            cut = await small.call("echo", {"text": "0123456789abcdef"})
            exact = await small.call("echo", {"text": "0123456789"})
            uncut = await whole.call("big", {"chars": 200_000})
    assert cut.content == [
        Text(text="0123456789"),
        Text(text="\n\n[result cut: showing the first 10 of 16 characters]"),
    ]
    assert exact.content == [Text(text="0123456789")]
    assert uncut.content == [Text(text="x" * 200_000)]


async def test_structured_content_is_kept_beside_the_text_within_the_bound(
    tmp_path: Path,
) -> None:
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(tmp_path / "s.log")) as mcp:
            server = mcp.servers[0]
            # echo returns str: the SDK sends the text and {"result": text} — one thing.
            echoed = await server.call("echo", {"text": "y" * 60_000})
            summed = await server.call("add", {"a": 2, "b": 3})
            # table sends a summary as text and its rows as structured content.
            table = await server.call("table", {"rows": 3})
            # ...rows that do not fit in max_result_chars are not kept, and it says so.
            huge = await server.call("table", {"rows": 5000})
    # Too big to keep, and the text (cut) already says what it says: no note.
    assert echoed.structured_content is None
    assert echoed.content[0] == Text(text="y" * 50_000)
    assert len(echoed.content) == 2  # the cut's note only
    assert summed.structured_content == {"result": 5}
    assert summed.content == [Text(text="5")]
    assert table.content == [Text(text="3 rows")]
    assert table.structured_content == {"rows": [{"n": i, "name": f"row {i}"} for i in range(3)]}
    assert huge.structured_content is None
    assert huge.content == [
        Text(text="5000 rows"),
        Text(text="\n\n[its structured content (over 50,000 characters) is not kept]"),
    ]
    assert [r.details for r in (echoed, summed, table, huge)] == [None] * 4


async def test_output_schemas_and_structured_content_reach_the_run(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(tmp_path / "s.log"), prefix="t") as mcp:
            tools = {t.name: t for t in mcp.tools}
            model = ScriptedModel(
                [
                    calls(
                        ("good", "t__shape", {"wrong": False}),
                        ("bad", "t__shape", {"wrong": True}),
                        ("sum", "t__add", {"a": 1, "b": 2}),
                    ),
                    reply(),
                ]
            )
            result, events, context = await run(mcp.tools, model)
    # The server's outputSchema (published by hand, or derived by its SDK from the
    # return annotation) is the tool's output_schema.
    assert tools["t__shape"].output_schema == {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["n", "tags"],
    }
    assert tools["t__add"].output_schema is not None
    assert tools["t__add"].output_schema["properties"]["result"]["type"] == "integer"
    assert tools["t__echo"].output_schema is not None
    assert tools["t__big"].output_schema is None  # structured_output=False
    end = ends(events)
    assert end["good"].result.structured_content == {"n": 7, "tags": ["a", "b"]}
    assert not end["good"].is_error
    assert end["sum"].result.structured_content == {"result": 3}
    # Content that does not match the schema is refused by the rule of every tool's
    # output schema (not the SDK's): an error result naming the path, nothing kept.
    assert end["bad"].is_error
    assert end["bad"].result.structured_content is None
    assert only_text(end["bad"].result) == (
        'Structured content of tool "t__shape" does not match its output schema:\n'
        '  - tags/1: 2 is not of type "string"\n'
        "\n"
        "Received structured content:\n" + json.dumps({"n": 7, "tags": ["a", 2]}, indent=2)
    )
    # The transcript keeps the structured content (JSON round trip checked here too).
    assert_run_invariants(result, events, model.requests, context)


async def test_structured_content_mismatch_over_http_lists_every_path(
    http: tuple[str, Path],
) -> None:
    url, _log = http
    with trio.fail_after(GUARD):
        async with open_mcp_tools(StreamableHttpServer(url, prefix="o")) as mcp:
            model = ScriptedModel(
                [
                    calls(
                        ("bad", "o__order", {"wrong": True}),
                        ("good", "o__order", {"wrong": False}),
                    ),
                    reply(),
                ]
            )
            result, events, context = await run(mcp.tools, model)
    end = ends(events)
    assert end["bad"].is_error
    assert end["bad"].result.structured_content is None
    said = only_text(end["bad"].result)
    assert said.splitlines()[:4] == [
        'Structured content of tool "o__order" does not match its output schema:',
        '  - total: "total" is a required property',
        '  - lines/1/qty: "2" is not of type "integer"',
        "",
    ]
    assert not end["good"].is_error
    assert end["good"].result.structured_content == {
        "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}],
        "total": 9.5,
    }
    assert_run_invariants(result, events, model.requests, context)


# --- tool names the model APIs accept --------------------------------------------------

ODD_NAMES = ["a.b", "a_b", "", "x" * 200, "x" * 199 + "y", "a/b"]


def odd_server(tmp_path: Path, **kwargs: Any) -> StdioServer:
    env = {"MCP_TEST_TOOLS": json.dumps(ODD_NAMES), "MCP_TEST_LOG": str(tmp_path / "s.log")}
    return StdioServer(
        sys.executable, SERVER, "stdio", env=env, stderr=str(tmp_path / "s.stderr"), **kwargs
    )


async def test_odd_tool_names_get_distinct_valid_stable_names(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_agent.mcp")
    answers: dict[str, str] = {}
    starts: list[list[str]] = []
    with trio.fail_after(GUARD):
        for _ in range(2):
            async with open_mcp_tools(odd_server(tmp_path, prefix="p")) as mcp:
                extra = [t for t in mcp.tools if t.name not in {f"p__{n}" for n in TOOL_NAMES}]
                starts.append([t.name for t in extra])
                for tool in extra:
                    call = ToolCall(id="1", name=tool.name, arguments={})
                    out = await tool.execute(call, {}, ToolContext(call=call, report=_ignore))
                    answers[tool.name] = only_text(out)
    names = starts[0]
    assert starts[1] == names  # the same list gives the same names at every start
    assert len(names) == len(set(names)) == len(ODD_NAMES) - 1  # "" is skipped
    assert all(len(n) <= 64 and re.fullmatch(r"[A-Za-z0-9_-]+", n) for n in names)
    # Each name reaches its own tool; the real a_b keeps its name.
    assert answers["p__a_b"] == "I am a_b"
    assert sorted(answers.values()) == sorted(f"I am {n}" for n in ODD_NAMES if n)
    by_answer = {v.removeprefix("I am "): k for k, v in answers.items()}
    assert re.fullmatch(r"p__a_b_[0-9a-f]{8}", by_answer["a.b"])
    assert re.fullmatch(r"p__a_b_[0-9a-f]{8}", by_answer["a/b"])
    assert re.fullmatch(r"p__x{52}_[0-9a-f]{8}", by_answer["x" * 200])
    warnings = [r.getMessage() for r in caplog.records if r.name == "trio_agent.mcp"]
    assert "MCP server p lists a tool without a name; skipped" in warnings
    assert (
        f"MCP server p: its tool 'a.b' is called {by_answer['a.b']!r} "
        "(another of its tools is called 'p__a_b')"
    ) in warnings
    assert (
        f"MCP server p: its tool {'x' * 200!r} is called {by_answer['x' * 200]!r} "
        "(the model APIs take at most 64 characters)"
    ) in warnings


async def test_a_tool_we_cannot_offer_is_skipped_not_the_server(tmp_path: Path) -> None:
    # Without a prefix a tool named "" would be a Tool named "": refused, so skipped.
    with trio.fail_after(GUARD):
        async with open_mcp_tools(odd_server(tmp_path)) as mcp:
            names = [t.name for t in mcp.tools]
            assert only_text(await mcp.servers[0].call("add", {"a": 1, "b": 1})) == "2"
    assert "" not in names
    assert names[: len(TOOL_NAMES)] == TOOL_NAMES


@given(
    prefix=st.none() | st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True),
    names=st.lists(
        st.text(min_size=1, max_size=80)
        | st.sampled_from(["a.b", "a_b", "a/b", "a_b_0ad2b8c6", "x" * 70, "x" * 71]),
        unique=True,
        max_size=12,
    ),
)
def test_model_names_are_injective_valid_and_stable(prefix: str | None, names: list[str]) -> None:
    mapping = model_names(prefix, names)
    assert list(mapping) == names
    assert len(set(mapping.values())) == len(names)
    head = f"{prefix}__" if prefix else ""
    for name, given_name in mapping.items():
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", given_name), given_name
        assert given_name.startswith(head)
        if len(head + name) <= 64 and re.fullmatch(r"[A-Za-z0-9_-]+", name):
            assert given_name == head + name
    assert model_names(prefix, names) == mapping
    # A tool added at the end renames none of the others, unless it takes a name as its own.
    more = model_names(prefix, [*names, "zz.new"])
    assert {n: more[n] for n in names} == mapping


# --- a server's own output: noise on stdout, its stderr -----------------------------------


async def test_noise_on_stdout_is_one_warning_not_a_traceback_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    env = {"MCP_TEST_BANNER": "3"}  # three lines printed before serving
    server = StdioServer(sys.executable, SERVER, "stdio", env=env, name="chatty")
    with trio.fail_after(GUARD):
        async with open_mcp_tools(server) as mcp:
            assert only_text(await mcp.servers[0].call("shout", {"lines": 3})) == "shouted 3"
            assert only_text(await mcp.servers[0].call("add", {"a": 1, "b": 2})) == "3"
    ours = [r for r in caplog.records if r.name == "trio_agent.mcp"]
    assert [r.levelno for r in ours] == [logging.WARNING] + [logging.DEBUG] * 5
    assert ours[0].getMessage() == (
        "MCP server chatty wrote a line on stdout that is not JSON-RPC, ignored (later ones "
        "are logged at DEBUG): 'Starting the test server, step 0...' (ValidationError)"
    )
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


async def test_a_server_that_does_not_start_shows_the_end_of_its_stderr(tmp_path: Path) -> None:
    missing = tmp_path / "moved_away.py"
    flood = (
        "import sys\n"
        "for i in range(100_000): print('line', i, file=sys.stderr)\n"
        "sys.exit('fatal: no database at db.local:5432')\n"
    )
    copy = tmp_path / "flood.stderr"
    with trio.fail_after(GUARD):
        with pytest.raises(McpServerError) as gone:
            async with open_mcp_tools(StdioServer(sys.executable, str(missing), name="gone")):
                pass
        with pytest.raises(McpServerError) as flooded:
            async with open_mcp_tools(
                StdioServer(sys.executable, "-c", flood, name="flood", stderr=str(copy))
            ):
                pass
    assert str(gone.value) == (
        "MCP server gone did not start: MCPError: Connection closed; its stderr ended with:\n"
        f"  {sys.executable}: can't open file {str(missing)!r}: [Errno 2] No such file or "
        "directory"
    )
    message = str(flooded.value)
    assert message.startswith("MCP server flood did not start: MCPError: Connection closed")
    assert message.endswith("  line 99999\n  fatal: no database at db.local:5432")
    assert len(message.splitlines()) == 13  # bounded: the last 12 lines
    # The copy has all of it.
    assert copy.read_text(encoding="utf-8").count("\n") == 100_001


async def test_a_server_that_dies_mid_call_shows_the_end_of_its_stderr(tmp_path: Path) -> None:
    copy = tmp_path / "copy.txt"
    with trio.fail_after(GUARD), open(copy, "w", encoding="utf-8") as file:  # noqa: ASYNC230
        async with open_mcp_tools(stdio_server(tmp_path / "s.log", name="db", stderr=file)) as mcp:
            out = await mcp.servers[0].call("die", {"message": "RuntimeError: lost the database"})
            later = await mcp.servers[0].call("echo", {"text": "x"})
    # An open text file given as stderr gets a copy.
    assert copy.read_text(encoding="utf-8").endswith("RuntimeError: lost the database\n")
    assert out.is_error
    assert only_text(out) == (
        "MCP server db: the connection closed (the server exited or crashed); its stderr "
        "ended with:\n  RuntimeError: lost the database"
    )
    assert only_text(later).startswith("MCP server db is not running: the connection closed")
    assert mcp.servers[0].error is not None
    assert mcp.servers[0].error.endswith("RuntimeError: lost the database")


async def test_a_stdio_server_gets_no_keys_from_our_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-servers")
    with trio.fail_after(GUARD):
        async with open_mcp_tools(stdio_server(tmp_path / "s.log")) as mcp:
            key = await mcp.servers[0].call("getenv", {"name": "OPENAI_API_KEY"})
            given_to_it = await mcp.servers[0].call("getenv", {"name": "MCP_TEST_LOG"})
            path = await mcp.servers[0].call("getenv", {"name": "PATH"})
    assert only_text(key) == "(unset)"
    assert only_text(given_to_it) == str(tmp_path / "s.log")
    assert only_text(path) == os.environ["PATH"]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_stdout_lines_split_anywhere_come_out_whole(cuts: list[int]) -> None:
    # What the transport's reader makes of stdout, whatever the chunks the pipe hands
    # it: every message whole and in order, blank lines and CRLF tolerated, the one line
    # that is not JSON-RPC ignored.
    messages = [
        {"jsonrpc": "2.0", "id": 1, "result": {"text": "é" * 40}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
        {"jsonrpc": "2.0", "id": 2, "result": {}},
    ]
    wire = (
        json.dumps(messages[0]).encode() + b"\r\n\n"
        + b"Listening on stdio\n"
        + json.dumps(messages[1]).encode() + b"\n"
        + json.dumps(messages[2]).encode() + b"\n"
    )  # fmt: skip
    bounds = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    chunks = [wire[a:b] for a, b in itertools.pairwise(bounds)]

    async def main() -> tuple[list[Any], int]:
        sender, receiver = trio.testing.memory_stream_one_way_pair()
        out, into = anyio.create_memory_object_stream[Any](0)
        noise = _Noise(server="test")
        got: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_stdout, receiver, out, noise)
            for chunk in chunks:
                await sender.send_all(chunk)
                await trio.testing.wait_all_tasks_blocked()
            await sender.aclose()
            async with into:
                async for item in into:
                    got.append(item.message.model_dump(by_alias=True, exclude_unset=True))
        return got, noise.lines

    got, noise_lines = trio.run(main)
    assert got == messages
    assert noise_lines == 1


def test_the_big_result_benchmark_runs() -> None:
    # The figures in benchmarks/README.md come from this; a smoke run keeps it working.
    root = Path(__file__).resolve().parent.parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_mcp", "--big", "0.2", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split()[:4] for line in done.stdout.splitlines() if " 0.2 " in line]
    assert [r[:3] for r in rows] == [
        ["SDK", "stdio_client", "(before)"],
        ["trio_agent.mcp", "(after)", "0.2"],
    ]


async def test_approval_patterns_make_mcp_calls_wait_and_resume_runs_them(
    tmp_path: Path,
) -> None:
    log = tmp_path / "s.log"
    with trio.fail_after(GUARD):
        async with open_mcp_tools(
            stdio_server(log), prefix="t", approval=["t__add", "dotted*"]
        ) as mcp:
            tools = {t.name: t for t in mcp.tools}
            gated = sorted(n for n, t in tools.items() if t.approval == "always")
            # "t__add" by the model's name; "dotted.name" by the server's own.
            assert gated == ["t__add", "t__dotted_name"]
            model = ScriptedModel(
                [calls(("a", "t__add", {"a": 2, "b": 3}), ("c", "t__count", {"steps": 1}))]
            )
            result, _, _ = await run(mcp.tools, model)
            assert result.reason == "deferred"
            assert [d.id for d in result.deferred] == ["a"]
            model.add(reply())
            done = await resume(result, {"a": Approve()}, model=model, tools=mcp.tools)
    assert done.reason == "stop"
    check_transcript(done.transcript)
    added = next(
        m for m in done.transcript if isinstance(m, ToolResultMessage) and m.tool_call_id == "a"
    )
    assert added.content == (Text(text="5"),)
    with pytest.raises(TypeError, match="list of name patterns"):
        open_mcp_tools(stdio_server(log), approval="t__add")
