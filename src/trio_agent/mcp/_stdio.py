"""Our stdio transport: a server run as a subprocess, newline-delimited JSON-RPC on its
stdin and stdout, behind the SDK's transport interface (an async context manager that
yields a pair of anyio memory streams of ``SessionMessage``).

Why not the SDK's ``stdio_client``: its reader appends each chunk to the unfinished line
(``buffer + chunk``), so a line of *n* bytes costs O(n²) — a 50 MB result took 19 s of
CPU and left every later call of the connection waiting — and it logs a traceback for
every stdout line that is not JSON-RPC. This one:

- keeps an unfinished line as a list of chunks and joins it once, so reading costs O(n),
  and between two chunks trio's other tasks run;
- parses each line once, with the SDK's own parser: the one synchronous step, linear in
  the line. (A worker thread would not help: the parser holds the GIL throughout.)
- ignores a stdout line that is not JSON-RPC with one warning per server on the
  ``trio_agent.mcp`` logger (later ones at DEBUG), not a traceback each;
- reads the server's stderr itself: the last lines are kept (bounded) for the error
  messages of a server that fails, and everything is copied to ``stderr`` if given.

Shutdown follows the MCP rule and the SDK's bounds, under a shield: stop taking messages,
let the writer flush (0.5 s), close the server's stdin, wait 2 s for it to exit, SIGTERM
its process group, 2 s, SIGKILL. The server runs in a session of its own, so a Ctrl-C at
the terminal reaches us, not it, and its children go with it. POSIX only: on Windows
:class:`~trio_agent.mcp.StdioServer` uses the SDK's transport.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, final

import anyio
import attrs
import trio
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["StderrTail", "logger", "stdio_transport"]

logger = logging.getLogger("trio_agent.mcp")

Chunk = bytes | bytearray  # what trio's streams hand out
Incoming = SessionMessage | Exception  # what the SDK's session reads
if TYPE_CHECKING:
    Streams = tuple[MemoryObjectReceiveStream[Incoming], MemoryObjectSendStream[SessionMessage]]

_CHUNK = 64 * 1024  # a pipe holds 64 KiB; a bigger read buffer only costs allocation
_WRITER_FLUSH = 0.5
_EXIT_GRACE = 2.0  # after stdin closes, then again after SIGTERM and after SIGKILL
_STDERR_DRAIN = 0.5  # after the server exited, for the last of its stderr
_NOISE_SHOWN = 200  # characters of a noise line quoted in the log


@final
class StderrTail:
    """The end of what a server wrote on its stderr: at most :attr:`KEEP` bytes are held
    however much it writes; :meth:`text` shows the last lines of it.
    """

    KEEP = 16 * 1024

    def __init__(self) -> None:
        self._buf = b""
        self._closed = trio.Event()

    def feed(self, data: Chunk) -> None:
        self._buf += data
        if len(self._buf) > 2 * self.KEEP:  # amortised: each byte is copied O(1) times
            self._buf = self._buf[-self.KEEP :]

    def close(self) -> None:
        """The stream ended (or is no longer read)."""
        self._closed.set()

    async def wait_closed(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the end of the stream (a child of the server may
        hold it open after the server exited). A checkpoint."""
        with trio.move_on_after(seconds):
            await self._closed.wait()

    def text(self, lines: int = 12, chars: int = 2000) -> str:
        """The last ``lines`` non-blank lines, at most ``chars`` characters, each
        indented by two spaces; ``""`` if there are none."""
        kept: list[str] = []
        size = 0
        for line in reversed(self._buf.decode("utf-8", "replace").splitlines()):
            line = line.rstrip()
            if not line:
                continue
            if size + len(line) > chars:
                if not kept:
                    kept.append("…" + line[-(chars - 1) :])
                break
            kept.append(line)
            size += len(line) + 1
            if len(kept) == lines:
                break
        return "\n".join(f"  {line}" for line in reversed(kept))


def describe_stderr(tail: StderrTail | None) -> str:
    """``"; its stderr ended with:\\n  ..."`` for an error message, or ``""``."""
    text = tail.text() if tail is not None else ""
    return f"; its stderr ended with:\n{text}" if text else ""


@attrs.define(eq=False)
class _Noise:
    """Counts stdout lines that are not JSON-RPC; the first is a warning, the rest DEBUG."""

    server: str
    lines: int = 0

    def report(self, line: Chunk, error: Exception) -> None:
        self.lines += 1
        shown = line[:_NOISE_SHOWN].decode("utf-8", "replace")
        if len(line) > _NOISE_SHOWN:
            shown += f"… ({len(line)} bytes)"
        level = logging.WARNING if self.lines == 1 else logging.DEBUG
        if logger.isEnabledFor(level):
            more = " (later ones are logged at DEBUG)" if self.lines == 1 else ""
            logger.log(
                level,
                "MCP server %s wrote a line on stdout that is not JSON-RPC, ignored%s: %r (%s)",
                self.server,
                more,
                shown,
                type(error).__name__,
            )


def _parse(line: Chunk) -> Incoming:
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError, a JSON error
        return exc


async def _read_stdout(
    stdout: trio.abc.ReceiveStream,
    send: MemoryObjectSendStream[Incoming],
    noise: _Noise,
) -> None:
    """Split stdout into lines (one join per line) and deliver each message; once the
    session is gone, keep reading and discarding, so a server writing to a full pipe can
    still exit. Closes ``send`` at the end of stdout."""
    pieces: list[Chunk] = []
    delivering = True

    async def deliver() -> bool:
        line = b"".join(pieces) if len(pieces) != 1 else pieces[0]
        pieces.clear()  # the line alone holds the bytes while it is parsed
        if not line or line.isspace():
            return True
        item = _parse(line)
        if isinstance(item, Exception):
            noise.report(line, item)
            return True
        try:
            await send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

    try:
        while chunk := await stdout.receive_some(_CHUNK):
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                if delivering:
                    pieces.append(chunk[start:end])
                    delivering = await deliver()
                pieces = []
                start = end + 1
            if delivering and start < len(chunk):
                pieces.append(chunk[start:] if start else chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass  # our shutdown closed the pipe, or it broke: the session sees the end
    finally:
        send.close()


async def _write_stdin(
    stdin: trio.abc.SendStream,
    receive: MemoryObjectReceiveStream[SessionMessage],
    read_end: MemoryObjectSendStream[Incoming],
    done: trio.Event,
) -> None:
    try:
        with receive:
            async for message in receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send_all(data.encode() + b"\n")
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        # The server stopped reading (it exited, or closed its stdin): the session sees
        # the connection end instead of a request waiting for ever.
        read_end.close()
    finally:
        done.set()


async def _read_stderr(
    stream: trio.abc.ReceiveStream, tail: StderrTail, copy: _Copy | None, server: str
) -> None:
    try:
        while chunk := await stream.receive_some(_CHUNK):
            tail.feed(chunk)
            if copy is not None and not await copy.write(chunk):
                logger.warning(
                    "MCP server %s: writing its stderr failed; it is no longer copied", server
                )
                copy = None
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        tail.close()


@attrs.define(eq=False)
class _Copy:
    """Where a server's stderr is copied: a path (appended to) or an open text file.
    Each write runs in a worker thread (a file may be a slow pipe or terminal)."""

    write_now: Callable[[Chunk], object]

    async def write(self, data: Chunk) -> bool:
        try:
            await trio.to_thread.run_sync(self.write_now, data)
        except (OSError, ValueError):  # a full disk, a closed file
            return False
        return True


@contextlib.asynccontextmanager
async def _stderr_copy(
    stderr: str | os.PathLike[str] | IO[str] | None,
) -> AsyncIterator[_Copy | None]:
    if stderr is None:
        yield None
        return
    if isinstance(stderr, str | os.PathLike):
        file: IO[bytes] = await trio.to_thread.run_sync(open, stderr, "ab")

        def append(data: Chunk) -> None:
            file.write(data)
            file.flush()

        try:
            yield _Copy(write_now=append)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(file.close)
        return
    text = stderr
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(data: Chunk) -> None:
        text.write(decoder.decode(data))
        text.flush()

    yield _Copy(write_now=write)


def _signal_group(process: trio.Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _stop(process: trio.Process) -> None:
    """Close stdin, then escalate; every wait bounded. Call under a shield."""
    assert process.stdin is not None
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        await process.stdin.aclose()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            _signal_group(process, sig)
        with trio.move_on_after(_EXIT_GRACE):
            await process.wait()
            break
    else:
        logger.warning("MCP server process %d is still alive after SIGKILL", process.pid)
    # What the server started and left running (its process group) goes with it.
    _signal_group(process, signal.SIGKILL)


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    stderr: str | os.PathLike[str] | IO[str] | None,
    tail: StderrTail,
    server: str,
) -> AsyncIterator[Streams]:
    """Start ``command`` and yield the SDK's stream pair for it.

    The server's stderr goes to ``tail`` (and is copied to ``stderr``, if given); a
    stdout line that is not JSON-RPC is logged as ``server``'s. Leaving stops the
    process (see the module docstring), also on cancel; the process and its group are
    gone afterwards unless a member survives SIGKILL.

    Raises:
        OSError: the command could not be started (not found, not executable...).
    """
    async with _stderr_copy(stderr) as copy:
        process = await trio.lowlevel.open_process(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        read_end, read_stream = anyio.create_memory_object_stream[Incoming](0)
        write_stream, write_end = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with trio.open_nursery() as nursery:
                writer_done = trio.Event()
                nursery.start_soon(_read_stdout, process.stdout, read_end, _Noise(server))
                nursery.start_soon(_write_stdin, process.stdin, write_end, read_end, writer_done)
                nursery.start_soon(_read_stderr, process.stderr, tail, copy, server)
                try:
                    yield read_stream, write_stream
                finally:
                    with trio.CancelScope(shield=True):
                        read_stream.close()  # a reader blocked on delivery drains instead
                        write_stream.close()
                        with trio.move_on_after(_WRITER_FLUSH):
                            await writer_done.wait()
                        await _stop(process)
                        await tail.wait_closed(_STDERR_DRAIN)
                    nursery.cancel_scope.cancel()
        finally:
            for end in (read_end, read_stream, write_stream, write_end):
                end.close()
            with trio.CancelScope(shield=True):
                if process.returncode is None:  # the nursery did not start
                    _signal_group(process, signal.SIGKILL)
                    with trio.move_on_after(_EXIT_GRACE):
                        await process.wait()
                for pipe in (process.stdin, process.stdout, process.stderr):
                    with contextlib.suppress(trio.BrokenResourceError, OSError):
                        await pipe.aclose()
