"""The workspace's file tools (read, write, edit, ls), confinement and write locks."""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from tests.kit.loop import text_of
from tests.kit.workspace import run
from trio_agent import (
    AssistantMessage,
    Context,
    Text,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    check_transcript,
    run_agent_loop,
)
from trio_agent._core._arguments import InvalidArguments
from trio_agent.testing import ScriptedModel
from trio_agent.tools import WorkspaceError, workspace
from trio_agent.tools._files import MAX_EDIT_BYTES, MAX_LINE_CHARS, MAX_LINES, MAX_READ_CHARS
from trio_agent.tools._workspace import Workspace

if TYPE_CHECKING:
    from pathlib import Path

    from trio_agent import Tool


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "README.md").write_text("# Demo\nhello world\nbye\n")
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("def main():\n    return 1\n")
    return folder


@pytest.fixture
def tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in workspace(root)}


async def fails(tools: dict[str, Tool], name: str, **args: Any) -> str:
    with pytest.raises(WorkspaceError) as info:
        await run(tools, name, **args)
    return str(info.value)


# --- the tool set ---------------------------------------------------------------------


def test_workspace_returns_the_tools_in_order(root: Path) -> None:
    names = [t.name for t in workspace(root)]
    assert names == ["read", "write", "edit", "ls", "find", "grep", "bash"]
    assert "bash" not in [t.name for t in workspace(root, allow_bash=False)]
    for t in workspace(root):
        assert t.parameters["type"] == "object"
        assert t.description


def test_workspace_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        workspace(tmp_path / "file")


# --- read -----------------------------------------------------------------------------


async def test_read_numbers_lines(tools: dict[str, Tool]) -> None:
    out = await run(tools, "read", path="README.md")
    assert text_of(out) == "     1\t# Demo\n     2\thello world\n     3\tbye"
    assert out.details == {
        "path": "README.md",
        "start": 1,
        "end": 3,
        "total_lines": 3,
        "truncated": False,
    }


async def test_read_offset_and_limit(tools: dict[str, Tool]) -> None:
    out = await run(tools, "read", path="README.md", offset=2, limit=1)
    assert text_of(out) == "     2\thello world\n\n[Lines 2-2 of 3. Use offset=3 to read on.]"
    out = await run(tools, "read", path="README.md", offset=3, limit=10)
    assert text_of(out) == "     3\tbye"


async def test_read_offset_errors(tools: dict[str, Tool]) -> None:
    assert await fails(tools, "read", path="README.md", offset=4) == (
        "offset 4 is past the end of README.md (3 lines)."
    )
    # Below 1: the tool's schema refuses it before any file work.
    with pytest.raises(InvalidArguments, match="offset: 0 is less than the minimum of 1"):
        await run(tools, "read", path="README.md", offset=0)
    with pytest.raises(InvalidArguments, match="limit: 0 is less than the minimum of 1"):
        await run(tools, "read", path="README.md", limit=0)


async def test_read_caps_lines_with_a_note(root: Path, tools: dict[str, Tool]) -> None:
    (root / "long.txt").write_text("".join(f"l{i}\n" for i in range(1, 2501)))
    text = text_of(await run(tools, "read", path="long.txt"))
    lines = text.split("\n")
    assert lines[0] == "     1\tl1"
    assert lines[MAX_LINES - 1] == f"{MAX_LINES:>6}\tl{MAX_LINES}"
    assert lines[-1] == (
        f"[Lines 1-2000 of 2500 (one read shows at most {MAX_LINES} lines or "
        f"{MAX_READ_CHARS} characters). Use offset=2001 to read on.]"
    )
    # A limit above the cap is capped, with the same note.
    assert "(one read shows at most" in text_of(
        await run(tools, "read", path="long.txt", limit=5000)
    )
    text = text_of(await run(tools, "read", path="long.txt", offset=2001))
    assert text.startswith("  2001\tl2001\n")
    assert text.endswith("  2500\tl2500")


async def test_read_caps_characters(root: Path, tools: dict[str, Tool]) -> None:
    (root / "wide.txt").write_text(("x" * 1000 + "\n") * 100)
    out = await run(tools, "read", path="wide.txt")
    text = text_of(out)
    assert len(text) <= MAX_READ_CHARS + 200
    assert out.details["end"] < 100
    assert f"Use offset={out.details['end'] + 1} to read on." in text
    assert out.details["total_lines"] == 100


async def test_read_cuts_very_long_lines(root: Path, tools: dict[str, Tool]) -> None:
    (root / "one.txt").write_text("y" * (MAX_LINE_CHARS + 10))
    text = text_of(await run(tools, "read", path="one.txt"))
    assert text.endswith("… [line cut: 10 more characters]")


async def test_read_empty_and_crlf(root: Path, tools: dict[str, Tool]) -> None:
    (root / "empty.txt").write_text("")
    assert text_of(await run(tools, "read", path="empty.txt")) == "empty.txt is empty."
    (root / "dos.txt").write_bytes(b"a\r\nb\r\n")
    assert text_of(await run(tools, "read", path="dos.txt")) == "     1\ta\n     2\tb"


async def test_read_refuses_binary(root: Path, tools: dict[str, Tool]) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert await fails(tools, "read", path="img.png") == (
        "img.png looks like a binary file (16 bytes, not UTF-8 text); read only shows text files."
    )
    (root / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert "looks like a binary file" in await fails(tools, "read", path="latin.txt")


async def test_read_accepts_a_character_cut_by_the_sniff_window(
    root: Path, tools: dict[str, Tool]
) -> None:
    # "é" is two bytes; put it across the 8192-byte boundary.
    (root / "u.txt").write_text(("a" * 99 + "\n") * 81 + "a" * 91 + "é\n", encoding="utf-8")
    text = text_of(await run(tools, "read", path="u.txt"))
    assert text.endswith("é")


async def test_read_errors_are_readable(root: Path, tools: dict[str, Tool]) -> None:
    assert await fails(tools, "read", path="nope.txt") == "nope.txt: no such file or directory."
    assert await fails(tools, "read", path="src") == "src is a directory; use ls to list it."
    os.mkfifo(root / "pipe")
    with trio.fail_after(5):
        assert await fails(tools, "read", path="pipe") == "pipe is not a regular file."
    assert await fails(tools, "read", path="") == (
        "The path is empty; give a path relative to the workspace."
    )


# --- write ----------------------------------------------------------------------------


async def test_write_creates_parents_and_overwrites(root: Path, tools: dict[str, Tool]) -> None:
    out = await run(tools, "write", path="a/b/c.txt", content="one\ntwo\n")
    assert text_of(out) == "Created a/b/c.txt (8 bytes, 2 lines)."
    assert (root / "a/b/c.txt").read_text() == "one\ntwo\n"
    assert out.details == {"path": "a/b/c.txt", "bytes": 8, "lines": 2, "created": True}
    out = await run(tools, "write", path="a/b/c.txt", content="é")
    assert text_of(out) == "Overwrote a/b/c.txt (2 bytes, 1 line)."
    assert (root / "a/b/c.txt").read_text() == "é"
    mode = (root / "a/b/c.txt").stat().st_mode
    assert not mode & stat.S_IXUSR


async def test_write_errors(root: Path, tools: dict[str, Tool]) -> None:
    assert await fails(tools, "write", path="src", content="x") == (
        "src is a directory; give the path of a file."
    )
    assert await fails(tools, "write", path="README.md/x", content="x") == (
        "README.md/x: a component of the path is a file, not a folder."
    )


async def test_write_through_a_symlink_inside_writes_its_target(
    root: Path, tools: dict[str, Tool]
) -> None:
    (root / "alias.md").symlink_to("README.md")
    await run(tools, "write", path="alias.md", content="new\n")
    assert (root / "README.md").read_text() == "new\n"
    assert (root / "alias.md").is_symlink()


# --- edit -----------------------------------------------------------------------------


async def test_edit_replaces_the_unique_match(root: Path, tools: dict[str, Tool]) -> None:
    out = await run(tools, "edit", path="README.md", old="hello world", new="hi\nthere")
    assert text_of(out) == "Edited README.md: replaced 1 occurrence at line 2 (1 line → 2 lines)."
    assert out.details == {"path": "README.md", "line": 2}
    assert (root / "README.md").read_text() == "# Demo\nhi\nthere\nbye\n"


async def test_edit_zero_matches(tools: dict[str, Tool]) -> None:
    assert await fails(tools, "edit", path="README.md", old="Hello", new="x") == (
        "old was not found in README.md (0 matches). It must match exactly, whitespace and "
        "line breaks included: read the file and copy the text."
    )


async def test_edit_several_matches_says_how_many_and_where(
    root: Path, tools: dict[str, Tool]
) -> None:
    (root / "dup.txt").write_text("x = 1\ny = 2\nx = 1\n\nx = 1\n")
    assert await fails(tools, "edit", path="dup.txt", old="x = 1", new="x = 3") == (
        "old matches 3 times in dup.txt (at lines 1, 3, 5); it must match exactly once. "
        "Include more of the surrounding lines to make it unique."
    )
    assert (root / "dup.txt").read_text() == "x = 1\ny = 2\nx = 1\n\nx = 1\n"


async def test_edit_other_errors(root: Path, tools: dict[str, Tool]) -> None:
    assert "old is empty" in await fails(tools, "edit", path="README.md", old="", new="x")
    assert "the same text" in await fails(tools, "edit", path="README.md", old="bye", new="bye")
    (root / "bin").write_bytes(b"\xff\xfe")
    assert await fails(tools, "edit", path="bin", old="a", new="b") == (
        "bin is not UTF-8 text; edit only changes text files."
    )
    (root / "dos.txt").write_bytes(b"a\r\nb\r\n")
    assert "CRLF" in await fails(tools, "edit", path="dos.txt", old="a\nb", new="c")
    assert await fails(tools, "edit", path="gone.txt", old="a", new="b") == (
        "gone.txt: no such file or directory."
    )


# --- ls -------------------------------------------------------------------------------


async def test_ls_marks_folders_and_symlinks(root: Path, tools: dict[str, Tool]) -> None:
    (root / "link").symlink_to("/")
    (root / ".hidden").write_text("")
    out = await run(tools, "ls")
    assert text_of(out) == ".hidden\nREADME.md\nlink@\nsrc/"
    assert out.details == {
        "path": ".",
        "dirs": ["src"],
        "files": [".hidden", "README.md"],
        "links": ["link"],
        "total": 4,
    }
    assert text_of(await run(tools, "ls", path="src")) == "app.py"


async def test_ls_errors(root: Path, tools: dict[str, Tool]) -> None:
    (root / "empty").mkdir()
    assert text_of(await run(tools, "ls", path="empty")) == "empty is an empty directory."
    assert await fails(tools, "ls", path="README.md") == (
        "README.md is not a directory; use read for files."
    )
    assert await fails(tools, "ls", path="nope") == "nope: no such file or directory."


# --- confinement ----------------------------------------------------------------------

OUTSIDE = [
    ("../x", "Refused: ../x is outside the workspace"),
    ("/etc/passwd", "Refused: /etc/passwd is outside the workspace"),
    ("src/../../x", "Refused: src/../../x is outside the workspace"),
    ("to_root/etc/passwd", "Refused: to_root/etc/passwd goes through a symlink to /etc/passwd"),
    ("chain1/passwd", "Refused: chain1/passwd goes through a symlink to /etc/passwd"),
    ("to_passwd", "Refused: to_passwd goes through a symlink to /etc/passwd"),
]


@pytest.fixture
def escapes(root: Path) -> Path:
    (root / "to_root").symlink_to("/")
    # A chain: chain1 -> chain2 -> /etc
    (root / "chain2").symlink_to("/etc")
    (root / "chain1").symlink_to("chain2")
    (root / "to_passwd").symlink_to("/etc/passwd")
    return root


@pytest.mark.parametrize(("path", "message"), OUTSIDE)
@pytest.mark.parametrize("tool", ["read", "write", "edit", "ls"])
async def test_escapes_are_refused(
    escapes: Path, tools: dict[str, Tool], tool: str, path: str, message: str
) -> None:
    args: dict[str, Any] = {"path": path}
    if tool == "write":
        args["content"] = "pwned"
    elif tool == "edit":
        args.update(old="root", new="pwned")
    text = await fails(tools, tool, **args)
    assert text.startswith(message), text
    assert "Only paths inside it can be used." in text


async def test_write_through_a_dangling_symlink_out_is_refused(
    tmp_path: Path, root: Path, tools: dict[str, Tool]
) -> None:
    target = tmp_path / "outside" / "new.txt"
    (root / "sneaky").symlink_to(target)
    (root / "sneaky_dir").symlink_to(tmp_path / "outside_dir")
    assert (await fails(tools, "write", path="sneaky", content="x")).startswith(
        "Refused: sneaky goes through a symlink to"
    )
    assert (await fails(tools, "write", path="sneaky_dir/a/b.txt", content="x")).startswith(
        "Refused: sneaky_dir/a/b.txt goes through a symlink"
    )
    assert not target.exists()
    assert not (tmp_path / "outside_dir").exists()


async def test_paths_that_stay_inside_are_allowed(
    root: Path, escapes: Path, tools: dict[str, Tool]
) -> None:
    expected = text_of(await run(tools, "read", path="README.md"))
    for path in (
        "src/../README.md",
        "./README.md",
        str(root / "README.md"),
        str(root / "src" / ".." / "README.md"),
    ):
        assert text_of(await run(tools, "read", path=path)) == expected, path
    assert text_of(await run(tools, "ls", path=str(root))).startswith("README.md\n")


async def test_out_through_a_symlink_and_back_in_is_refused(
    root: Path, escapes: Path, tools: dict[str, Tool]
) -> None:
    # Each step of a path must stay inside (as with openat2's RESOLVE_BENEATH): a walk
    # that leaves through a symlink is refused even if it would come back in.
    text = await fails(tools, "read", path=f"to_root{root}/README.md")
    assert text.startswith(
        f"Refused: to_root{root}/README.md goes through the symlink to_root (to /), which is "
        "outside the workspace"
    ), text


async def test_root_given_through_a_symlink(tmp_path: Path, root: Path) -> None:
    (tmp_path / "alias").symlink_to(root)
    tools = {t.name: t for t in workspace(tmp_path / "alias")}
    assert text_of(await run(tools, "read", path=str(tmp_path / "alias" / "README.md")))
    assert text_of(await run(tools, "read", path=str(root / "README.md")))
    assert (await fails(tools, "read", path=str(tmp_path / "ws2"))).startswith("Refused")


async def test_symlink_loop_is_a_clear_error(root: Path, tools: dict[str, Tool]) -> None:
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    assert await fails(tools, "read", path="loop_a") == (
        "Refused: loop_a is a symlink loop, or a symlink that changed after the path was checked."
    )


# --- write locks ----------------------------------------------------------------------


async def test_writes_to_one_file_wait_for_each_other_but_not_for_other_files(
    root: Path,
) -> None:
    ws = Workspace(root)
    tools = {t.name: t for t in ws.tools()}
    key = ws.root.path + "/a.txt"
    done: list[str] = []
    b_done = trio.Event()

    async def write(path: str, content: str) -> None:
        await run(tools, "write", path=path, content=content)
        done.append(path)
        if path == "b.txt":
            b_done.set()

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            async with ws.locks.hold(key):
                nursery.start_soon(write, "a.txt", "A")
                # Another spelling of the same file takes the same lock.
                nursery.start_soon(write, "src/../a.txt", "A2")
                nursery.start_soon(write, "b.txt", "B")
                await b_done.wait()
                # This task and both writes to a.txt (which resolve their path in a
                # thread first, and threads signal nothing we could wait on).
                while ws.locks.users(key) < 3:  # noqa: ASYNC110
                    await trio.sleep(0.001)
                await trio.testing.wait_all_tasks_blocked()
                assert done == ["b.txt"]
                assert not (root / "a.txt").exists()
    assert sorted(done) == ["a.txt", "b.txt", "src/../a.txt"]
    assert (root / "a.txt").read_text() in ("A", "A2")
    assert (root / "b.txt").read_text() == "B"
    assert len(ws.locks) == 0


async def test_parallel_edits_of_one_file_through_the_loop_lose_nothing(root: Path) -> None:
    (root / "log.txt").write_text("END\n")
    n = 12
    calls = tuple(
        ToolCall(
            id=f"e{i}", name="edit", arguments={"path": "log.txt", "old": "END", "new": f"{i}\nEND"}
        )
        for i in range(n)
    )
    model = ScriptedModel(
        [
            AssistantMessage(content=calls, stop_reason="tool_use"),
            AssistantMessage(content=(Text(text="done"),), stop_reason="stop"),
        ]
    )
    with trio.fail_after(10):
        result = await run_agent_loop(
            [UserMessage.text("go")], Context(tools=workspace(root)), model
        )
    check_transcript(result.transcript)
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False] * n
    lines = (root / "log.txt").read_text().split("\n")
    assert sorted(lines[:-2], key=int) == [str(i) for i in range(n)]
    assert lines[-2:] == ["END", ""]


async def test_refusals_reach_the_model_as_error_results(escapes: Path) -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                content=(
                    ToolCall(id="r1", name="read", arguments={"path": "/etc/passwd"}),
                    ToolCall(id="r2", name="read", arguments={"path": "to_root/etc/hostname"}),
                    ToolCall(id="r3", name="read", arguments={"path": "README.md", "limit": "1"}),
                ),
                stop_reason="tool_use",
            ),
            AssistantMessage(content=(Text(text="ok"),), stop_reason="stop"),
        ]
    )
    result = await run_agent_loop(
        [UserMessage.text("go")], Context(tools=workspace(escapes)), model
    )
    r1, r2, r3 = (m for m in result.messages if isinstance(m, ToolResultMessage))
    assert r1.is_error
    assert r1.text.startswith("Refused: /etc/passwd is outside the workspace")
    assert r2.is_error
    assert "goes through a symlink to /etc/hostname" in r2.text
    # "1" was converted to an integer by the schema-driven argument conversion.
    assert not r3.is_error
    assert r3.text.startswith("     1\t# Demo")


# --- races, hard links, full disks, huge files, odd names -------------------------------

RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _renameat2() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        fn = libc.renameat2
    except AttributeError:
        pytest.skip("no renameat2 in this C library")
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux-only")
async def test_a_folder_swapped_for_a_symlink_mid_call_never_leads_outside(
    tmp_path: Path, root: Path
) -> None:
    # A thread swaps the folder d with a symlink to outside, atomically and again and
    # again, while write d/x and read d/x run in a loop. Checking a resolved path and
    # opening it again by name lets some calls through to outside; walking from
    # descriptor to descriptor lets none.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x").write_text("OUTSIDE")
    (root / "d").mkdir()
    (root / "d" / "x").write_text("inside")
    (root / "s").symlink_to(outside)
    renameat2 = _renameat2()
    a, b = os.fsencode(root / "d"), os.fsencode(root / "s")
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            if renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
                raise OSError(ctypes.get_errno(), "renameat2")
            swaps += 1

    tools = {t.name: t for t in workspace(root, allow_bash=False)}
    reads = writes = read_escapes = 0
    thread = threading.Thread(target=swap)
    thread.start()
    try:
        with trio.fail_after(30):
            end = trio.current_time() + 3
            i = 0
            await trio.lowlevel.checkpoint()
            while trio.current_time() < end:
                i += 1
                with contextlib.suppress(WorkspaceError):
                    await run(tools, "write", path="d/x", content=f"w{i}")
                    writes += 1
                with contextlib.suppress(WorkspaceError):
                    text = text_of(await run(tools, "read", path="d/x"))
                    reads += 1
                    read_escapes += "OUTSIDE" in text
    finally:
        stop.set()
        thread.join()
    assert swaps > 1000
    assert reads > 50
    assert writes > 50
    assert read_escapes == 0
    assert sorted(os.listdir(outside)) == ["x"]
    assert (outside / "x").read_text() == "OUTSIDE"


async def test_writing_a_hard_link_to_outside_replaces_the_link_not_the_file(
    tmp_path: Path, root: Path, tools: dict[str, Tool]
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("keep me\n")
    os.link(outside, root / "hl.txt")
    os.link(outside, root / "hl2.txt")
    # Reading is allowed: a hard link is the file itself, and making one needs access
    # to the file already.
    assert text_of(await run(tools, "read", path="hl.txt")) == "     1\tkeep me"
    await run(tools, "write", path="hl.txt", content="pwned\n")
    await run(tools, "edit", path="hl2.txt", old="keep", new="pwned")
    assert outside.read_text() == "keep me\n"
    assert (root / "hl.txt").read_text() == "pwned\n"
    assert (root / "hl2.txt").read_text() == "pwned me\n"
    assert outside.stat().st_nlink == 1


async def test_write_keeps_the_mode_and_leaves_no_temporary_file(
    root: Path, tools: dict[str, Tool]
) -> None:
    script = root / "run.sh"
    script.write_text("echo a\n")
    script.chmod(0o750)
    await run(tools, "edit", path="run.sh", old="a", new="b")
    await run(tools, "write", path="run.sh", content="echo c\n")
    assert script.read_text() == "echo c\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert sorted(os.listdir(root)) == ["README.md", "run.sh", "src"]


# Run in a child process: RLIMIT_FSIZE stands in for a full disk (files cannot grow past
# 64 KiB) without limiting the test process.
FULL_DISK = """
import functools, resource, sys, trio
from trio_agent import ToolCall, ToolContext
from trio_agent.tools import WorkspaceError, workspace

tools = {t.name: t for t in workspace(sys.argv[1], allow_bash=False)}
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

async def call(name, **args):
    c = ToolCall(id="c", name=name, arguments=args)
    async def report(p): pass
    try:
        out = await tools[name].execute(c, args, ToolContext(call=c, report=report))
        print("ok", out.content)
    except WorkspaceError as exc:
        print("error", exc)

for name, args in [
    ("edit", {"path": "big.txt", "old": "line 1\\n", "new": "line one\\n"}),
    ("write", {"path": "big.txt", "content": "x" * 100_000}),
    ("write", {"path": "new.txt", "content": "x" * 100_000}),
]:
    trio.run(functools.partial(call, name, **args))
"""


async def test_a_write_that_fails_leaves_the_file_whole(root: Path) -> None:
    big = root / "big.txt"
    big.write_text("".join(f"line {i}\n" for i in range(1, 14_000)))
    before = big.read_bytes()
    assert len(before) > 65536
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", FULL_DISK, str(root)], capture_stdout=True, check=True
        )
    lines = done.stdout.decode().splitlines()
    assert lines == [
        "error Could not write big.txt: File too large. Nothing was written: big.txt was "
        "left unchanged.",
        "error Could not write big.txt: File too large. Nothing was written: big.txt was "
        "left unchanged.",
        "error Could not write new.txt: File too large. Nothing was written: new.txt was "
        "not created.",
    ]
    assert big.read_bytes() == before
    assert sorted(os.listdir(root)) == ["README.md", "big.txt", "src"]


SPARSE_READ = """
import sys, time, trio
from trio_agent import ToolCall, ToolContext
from trio_agent.tools import workspace

(read,) = (t for t in workspace(sys.argv[1], allow_bash=False) if t.name == "read")
args = {"path": "huge.txt", "limit": 1}
c = ToolCall(id="c", name="read", arguments=args)
async def report(p): pass
async def main():
    return await read.execute(c, args, ToolContext(call=c, report=report))
start = time.monotonic()
out = trio.run(main)
took = time.monotonic() - start
# The peak of this process image (ru_maxrss would carry the forking parent's over).
with open("/proc/self/status") as f:
    peak = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))  # KiB
print(peak, round(took, 2))
print(out.content[-80:])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
async def test_reading_a_huge_line_stays_in_bounded_memory(root: Path) -> None:
    # 1 GiB, sparse: 9 KB of text and no newline. The line is cut before it is decoded,
    # so memory stays small; the note still counts every byte cut.
    (root / "huge.txt").write_bytes(b"t" * 9000)
    os.truncate(root / "huge.txt", 1 << 30)  # sparse
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, "-c", SPARSE_READ, str(root)], capture_stdout=True, check=True
        )
    first, text = done.stdout.decode().split("\n", 1)
    peak_kib = int(first.split()[0])
    assert peak_kib < 150 * 1024, first
    missing = (1 << 30) - MAX_LINE_CHARS
    assert text.rstrip("\n").endswith(f"… [line cut: {missing} more bytes]")


async def test_edit_refuses_a_file_over_the_cap(root: Path, tools: dict[str, Tool]) -> None:
    (root / "big.log").write_bytes(b"TODO\n")
    os.truncate(root / "big.log", MAX_EDIT_BYTES + 1)  # sparse
    text = await fails(tools, "edit", path="big.log", old="TODO", new="done")
    assert text == (
        f"big.log is {MAX_EDIT_BYTES + 1} bytes; edit changes files up to 10 MB. "
        "Use bash (for example sed) for it."
    )


async def test_names_that_are_not_utf8_are_shown_escaped_and_found_again(
    root: Path, tools: dict[str, Tool]
) -> None:
    odd = os.fsdecode(b"caf\xe9.txt")
    (root / odd).write_text("bonjour\n")
    (root / os.fsdecode(b"b\\ck\xff")).write_text("")  # a backslash in such a name
    out = await run(tools, "ls")
    assert text_of(out) == "\n".join(["README.md", "b\\\\ck\\xff", "caf\\xe9.txt", "src/"])
    assert out.details["files"] == ["README.md", "b\\\\ck\\xff", "caf\\xe9.txt"]
    # The name as ls shows it works in every file tool.
    assert text_of(await run(tools, "read", path="caf\\xe9.txt")) == "     1\tbonjour"
    await run(tools, "edit", path="caf\\xe9.txt", old="bonjour", new="salut")
    assert (root / odd).read_text() == "salut\n"
    assert text_of(await run(tools, "read", path="b\\\\ck\\xff")) == "b\\\\ck\\xff is empty."


async def test_write_a_file_with_the_longest_name(root: Path, tools: dict[str, Tool]) -> None:
    name = "é" * 127  # 254 bytes: the temporary file's name must still fit
    await run(tools, "write", path=name, content="x")
    await run(tools, "write", path=name, content="y")
    assert (root / name).read_text() == "y"
    assert sorted(os.listdir(root)) == sorted(["README.md", "src", name])
