"""The workspace's find and grep: glob matching, confined walks, caps and messages."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest
import trio

from tests.kit.loop import text_of
from tests.kit.workspace import run
from trio_agent import (
    AssistantMessage,
    Context,
    LoopConfig,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    run_agent_loop,
)
from trio_agent.testing import ScriptedModel
from trio_agent.tools import WorkspaceError, _search, workspace
from trio_agent.tools._search import compile_glob

if TYPE_CHECKING:
    from pathlib import Path

    from trio_agent import Tool


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "src" / "pkg").mkdir(parents=True)
    (folder / "docs").mkdir()
    (folder / ".git").mkdir()
    (folder / "node_modules" / "dep").mkdir(parents=True)
    (folder / "README.md").write_text("# Demo\nTODO: write docs\n")
    (folder / "src" / "main.py").write_text("def main():\n    pass  # todo later\n")
    (folder / "src" / "pkg" / "util.py").write_text("X = 1\n# TODO: more\n")
    (folder / "docs" / "guide.md").write_text("nothing here\n")
    (folder / ".git" / "config").write_text("TODO in git\n")
    (folder / "node_modules" / "dep" / "index.py").write_text("TODO in deps\n")
    (folder / "logo.bin").write_bytes(b"TODO\x00\x01\x02")
    return folder


@pytest.fixture
def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in workspace(root, allow_bash=False)}


# --- glob ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "main.py", True),
        ("*.py", "src/pkg/util.py", True),  # no slash: the name, at any depth
        ("*.py", "src/pkg/util.pyc", False),
        ("src/*.py", "src/main.py", True),
        ("src/*.py", "src/pkg/util.py", False),  # * stays within one segment
        ("src/**/*.py", "src/main.py", True),  # ** matches zero segments
        ("src/**/*.py", "src/pkg/util.py", True),
        ("src/**/*.py", "tests/x.py", False),
        ("**/pkg/*", "src/pkg/util.py", True),
        ("**/pkg/*", "pkg/util.py", True),
        ("src/**", "src/pkg/util.py", True),
        ("src/**", "docs/guide.md", False),
        ("./src/?ain.py", "src/main.py", True),
        ("[mu]*.py", "src/pkg/util.py", True),
        ("[!mu]*.py", "src/pkg/util.py", False),
        ("docs/guide.md", "docs/guide.md", True),
        ("docs//guide.md", "docs/guide.md", True),
        ("README.MD", "README.md", False),  # case-sensitive
    ],
)
def test_glob(pattern: str, path: str, expected: bool) -> None:
    assert compile_glob(pattern)(path) is expected


def test_empty_glob_is_refused() -> None:
    with pytest.raises(WorkspaceError, match="The pattern is empty"):
        compile_glob("  ./")


# --- find -----------------------------------------------------------------------------


async def test_find_lists_sorted_matches_and_skips_bulky_folders(
    tools: dict[str, Tool],
) -> None:
    out = await run(tools, "find", pattern="*.py")
    assert text_of(out) == "src/main.py\nsrc/pkg/util.py"
    assert out.details == {
        "pattern": "*.py",
        "count": 2,
        "truncated": False,
        "escaping_links_skipped": 0,
    }
    assert text_of(await run(tools, "find", pattern="**")) == (
        "README.md\ndocs/\ndocs/guide.md\nlogo.bin\nsrc/\nsrc/main.py\nsrc/pkg/\nsrc/pkg/util.py"
    )


async def test_find_under_a_path(tools: dict[str, Tool]) -> None:
    assert text_of(await run(tools, "find", pattern="*", path="src/pkg")) == "src/pkg/util.py"
    assert text_of(await run(tools, "find", pattern="*.md", path="src/..")) == (
        "README.md\ndocs/guide.md"
    )


async def test_find_without_match_and_errors(tools: dict[str, Tool]) -> None:
    assert text_of(await run(tools, "find", pattern="*.rs")) == "No path matches *.rs under .."
    with pytest.raises(WorkspaceError, match=r"^README.md is not a directory"):
        await run(tools, "find", pattern="*", path="README.md")
    with pytest.raises(WorkspaceError, match=r"^Refused: \.\./ is outside the workspace"):
        await run(tools, "find", pattern="*", path="../")


async def test_find_never_walks_out_through_a_symlink(root: Path, tools: dict[str, Tool]) -> None:
    (root / "to_root").symlink_to("/")
    (root / "chain").symlink_to("to_root")
    (root / "to_passwd").symlink_to("/etc/passwd")
    out = await run(tools, "find", pattern="passwd")
    assert text_of(out) == "No path matches passwd under .."
    assert out.details["escaping_links_skipped"] == 3
    with pytest.raises(WorkspaceError, match="goes through a symlink to /etc"):
        await run(tools, "find", pattern="*", path="to_root/etc")


async def test_find_follows_links_inside_once(root: Path, tools: dict[str, Tool]) -> None:
    (root / "src" / "pkg" / "up").symlink_to("../..")  # a loop back to the root
    (root / "lib").symlink_to("src/pkg")
    text = text_of(await run(tools, "find", pattern="util.py"))
    # The real folder is entered once, through whichever name the walk meets first.
    assert text == "lib/util.py"


async def test_find_caps_results(
    root: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_search, "MAX_FIND_RESULTS", 3)
    text = text_of(await run(tools, "find", pattern="**"))
    assert text.split("\n\n")[0].count("\n") == 2
    assert text.endswith("[More than 3 matches; showing the first 3.]")


async def test_walks_stop_after_too_many_entries(
    tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_search, "MAX_VISITED", 4)
    out = await run(tools, "find", pattern="*.py")
    assert "[The search stopped after looking at 4 entries; narrow the path.]" in text_of(out)
    assert out.details["truncated"] is True


# --- grep -----------------------------------------------------------------------------


async def test_grep_lists_matches_with_path_and_line(tools: dict[str, Tool]) -> None:
    out = await run(tools, "grep", pattern="TODO")
    assert text_of(out) == (
        "README.md:2: TODO: write docs\nsrc/pkg/util.py:2: # TODO: more\n"
        "[Skipped 1 binary file: logo.bin.]"
    )
    assert out.details["files_searched"] == 4
    assert out.details["files_skipped"] == 1  # logo.bin: binary
    assert out.details["skipped_binary"] == ["logo.bin"]
    out = await run(tools, "grep", pattern="todo", ignore_case=True, path="src")
    assert text_of(out) == "src/main.py:2:     pass  # todo later\nsrc/pkg/util.py:2: # TODO: more"


async def test_grep_one_file_and_anchors(tools: dict[str, Tool]) -> None:
    assert text_of(await run(tools, "grep", pattern=r"^def \w+", path="src/main.py")) == (
        "src/main.py:1: def main():"
    )


async def test_grep_messages(tools: dict[str, Tool]) -> None:
    assert text_of(await run(tools, "grep", pattern="nomatch")) == (
        "No match for /nomatch/ in . (4 files searched).\n[Skipped 1 binary file: logo.bin.]"
    )
    with pytest.raises(WorkspaceError) as info:
        await run(tools, "grep", pattern="(unclosed")
    assert str(info.value).startswith("Invalid regular expression '(unclosed': missing ):")
    with pytest.raises(WorkspaceError, match=r"^nope: no such file or directory\.$"):
        await run(tools, "grep", pattern="x", path="nope")
    with pytest.raises(WorkspaceError, match=r"^Refused: /etc is outside the workspace"):
        await run(tools, "grep", pattern="root", path="/etc")


async def test_grep_never_reads_through_a_symlink_out(root: Path, tools: dict[str, Tool]) -> None:
    (root / "passwd").symlink_to("/etc/passwd")
    (root / "etc").symlink_to("/etc")
    out = await run(tools, "grep", pattern="root")
    assert text_of(out).startswith("No match for /root/")
    assert out.details["escaping_links_skipped"] == 2
    with pytest.raises(WorkspaceError, match="goes through a symlink to /etc/passwd"):
        await run(tools, "grep", pattern="root", path="passwd")


async def test_grep_reads_links_inside(root: Path, tools: dict[str, Tool]) -> None:
    (root / "alias.md").symlink_to("docs/guide.md")
    assert text_of(await run(tools, "grep", pattern="nothing")) == (
        "alias.md:1: nothing here\ndocs/guide.md:1: nothing here\n"
        "[Skipped 1 binary file: logo.bin.]"
    )


async def test_grep_caps_matches_and_line_length(
    root: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "many.txt").write_text("hit\n" * 10 + "hit" + "x" * 1000 + "\n")
    monkeypatch.setattr(_search, "MAX_GREP_MATCHES", 5)
    out = await run(tools, "grep", pattern="hit", path="many.txt")
    lines = text_of(out).split("\n")
    assert lines[:5] == [f"many.txt:{i}: hit" for i in range(1, 6)]
    assert lines[-1] == "[Stopped at 5 matches; narrow the pattern or the path to see the rest.]"
    assert out.details["truncated"] is True
    monkeypatch.setattr(_search, "MAX_GREP_MATCHES", 100)
    last = text_of(await run(tools, "grep", pattern="hitx", path="many.txt")).split("\n")[-1]
    assert last == "many.txt:11: hit" + "x" * (_search.MAX_GREP_LINE - 3) + " …"


# --- a regex cannot stall the loop; skipped files are named --------------------------


async def test_a_catastrophic_pattern_ends_within_the_tool_timeout_and_the_loop_runs_on(
    root: Path,
) -> None:
    # With backtracking, ^(a+)+$ on many a's and a "!" takes exponential time while
    # holding the GIL: every task of the process stops. RE2 answers in linear time.
    (root / "evil.txt").write_text("a" * 28 + "!\n")
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(
                    ToolCall(
                        id="g1", name="grep", arguments={"pattern": "^(a+)+$", "path": "evil.txt"}
                    ),
                ),
                stop_reason="tool_use",
            ),
            AssistantMessage(content=(Text(text="ok"),), stop_reason="stop"),
        ]
    )
    ticks: list[float] = []

    async def ticker() -> None:
        while True:
            ticks.append(trio.current_time())
            await trio.sleep(0.01)

    tool_timeout = 2.0
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            start = trio.current_time()
            result = await run_agent_loop(
                [UserMessage.text("go")],
                Context(tools=workspace(root, allow_bash=False)),
                model,
                LoopConfig(tool_timeout=tool_timeout),
            )
            took = trio.current_time() - start
            ticks.append(trio.current_time())
            nursery.cancel_scope.cancel()
    check_transcript(result.transcript)
    (res,) = (m for m in result.messages if isinstance(m, ToolResultMessage))
    assert not res.is_error
    assert res.text == "No match for /^(a+)+$/ in evil.txt (1 file searched)."
    assert took < tool_timeout
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert max(gaps) < 1.0  # a backtracking engine freezes every task for ~19 s here


async def test_a_pattern_re2_refuses_is_a_clear_error(tools: dict[str, Tool]) -> None:
    with pytest.raises(WorkspaceError) as info:
        await run(tools, "grep", pattern=r"(a)\1")
    assert str(info.value).startswith(
        "Invalid regular expression '(a)\\\\1': invalid escape sequence: \\1. grep uses RE2 "
        "syntax, which matches in linear time: no backreferences"
    )


async def test_skipped_files_are_counted_and_named(root: Path, tools: dict[str, Tool]) -> None:
    # A log over the size cap whose first line matches: the result must not read as
    # "nothing found" without saying a file was left out.
    (root / "big.log").write_bytes(b"TODO fix this\n")
    os.truncate(root / "big.log", _search.MAX_GREP_FILE + 1)  # sparse
    os.mkfifo(root / "pipe")
    out = await run(tools, "grep", pattern="TODO", path="big.log")
    assert text_of(out) == (
        "No match for /TODO/ in big.log (0 files searched).\n"
        "[Skipped 1 file over 10 MB: big.log. Search such a file with bash, or read it in "
        "parts.]"
    )
    with trio.fail_after(10):
        out = await run(tools, "grep", pattern="fix this")
    assert text_of(out) == (
        "No match for /fix this/ in . (4 files searched).\n"
        "[Skipped 1 file over 10 MB: big.log. Search such a file with bash, or read it in "
        "parts.]\n"
        "[Skipped 1 binary file: logo.bin.]\n"
        "[Skipped 1 unreadable or special file: pipe.]"
    )
    assert out.details["files_skipped"] == 3
    assert out.details["skipped_too_big"] == ["big.log"]
    assert out.details["skipped_unreadable"] == ["pipe"]


async def test_many_skipped_files_are_all_counted(
    root: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_search, "MAX_GREP_FILE", 3)
    out = await run(tools, "grep", pattern="zzz", path="src")
    assert text_of(out) == (
        "No match for /zzz/ in src (0 files searched).\n"
        "[Skipped 2 files over 0 MB: src/main.py, src/pkg/util.py. Search such a file with "
        "bash, or read it in parts.]"
    )
    monkeypatch.setattr(_search, "MAX_NAMED", 1)
    assert "src/main.py, and 1 more." in text_of(await run(tools, "grep", pattern="z", path="src"))


async def test_find_and_grep_show_names_that_are_not_utf8_escaped(
    root: Path, tools: dict[str, Tool]
) -> None:
    (root / "docs" / os.fsdecode(b"caf\xe9.md")).write_text("TODO: caf\xc3\xa9\n")
    assert text_of(await run(tools, "find", pattern="*.md", path="docs")) == (
        "docs/caf\\xe9.md\ndocs/guide.md"
    )
    out = await run(tools, "grep", pattern="caf", path="docs")
    assert text_of(out) == "docs/caf\\xe9.md:1: TODO: cafÃ©"
    # The shown path can be given back.
    assert text_of(await run(tools, "grep", pattern="TODO", path="docs/caf\\xe9.md")) == (
        "docs/caf\\xe9.md:1: TODO: cafÃ©"
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux-only")
async def test_find_and_grep_never_walk_out_while_a_folder_is_swapped(
    tmp_path: Path, root: Path, tools: dict[str, Tool]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    (root / "d").mkdir()
    (root / "d" / "secret.txt").write_text("inside\n")
    (root / "s").symlink_to(outside)
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = os.fsencode(root / "d"), os.fsencode(root / "s")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            libc.renameat2(-100, a, -100, b, 2)

    thread = threading.Thread(target=swap)
    thread.start()
    leaks = calls = found = 0
    try:
        with trio.fail_after(30):
            end = trio.current_time() + 2
            await trio.lowlevel.checkpoint()
            while trio.current_time() < end:
                for args in ({"path": "d"}, {}):
                    with contextlib.suppress(WorkspaceError):
                        text = text_of(await run(tools, "grep", pattern="SECRET|inside", **args))
                        calls += 1
                        leaks += "secret.txt:1: SECRET" in text
                        found += "secret.txt:1: inside" in text
    finally:
        stop.set()
        thread.join()
    assert calls > 20
    assert found > 0
    assert leaks == 0


async def test_find_names_folders_it_could_not_list(
    root: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests run as root, where permissions do not stop a listing: a folder replaced by
    # something else between listing and opening stands in.
    real_open = os.open

    def flaky_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "docs" and kwargs.get("dir_fd") is not None:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", flaky_open)
    out = await run(tools, "find", pattern="*.md")
    assert text_of(out) == "README.md\n[Could not list 1 folder: docs.]"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/self/fd")
async def test_no_descriptor_is_left_open(
    root: Path, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "out").symlink_to("/etc")
    (root / "lib").symlink_to("src/pkg")
    writer = {t.name: t for t in workspace(root, allow_bash=False)}
    before = sorted(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(_search, "MAX_GREP_MATCHES", 1)  # grep stops mid-walk
    for name, args in [
        ("find", {"pattern": "**"}),
        ("grep", {"pattern": "TODO"}),
        ("grep", {"pattern": "X", "path": "lib/util.py"}),
        ("grep", {"pattern": "x", "path": "out/passwd"}),
        ("ls", {"path": "src"}),
        ("ls", {"path": "nope"}),
        ("read", {"path": "README.md"}),
        ("read", {"path": "out/hostname"}),
        ("write", {"path": "new/dir/f.txt", "content": "x"}),
        ("edit", {"path": "new/dir/f.txt", "old": "x", "new": "y"}),
        ("edit", {"path": "new/dir/f.txt", "old": "x", "new": "y"}),
    ]:
        with contextlib.suppress(WorkspaceError):
            await run(writer, name, **args)
    assert sorted(os.listdir("/proc/self/fd")) == before
