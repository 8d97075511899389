"""Cassettes: what a model was asked and what it answered, as JSON lines on disk.

File format, version 1 (UTF-8, one JSON object per line, each line ends with ``\\n``)::

    {"format":"trio-agent-cassette","version":1}                       the header
    {"index":0,"digest":"sha256:…","request":{…},"events":[…],"end":{…}}  one line per
    {"index":1,…}                                                       request

A record holds the request as the model received it (``system_prompt``, ``messages``,
``tools``, ``options``, with the serialization of transcripts), the assistant events
it streamed back, each with its offset in seconds (trio clock) from the moment the
stream was opened, and how the stream ended (:class:`StreamEnd`).

The digest is the SHA-256 of the request's *canonical* JSON: keys sorted, no
whitespace, and without what a model never sees — message ``timestamp``\\ s and the
``details`` of tool results (application data the providers do not send). Two
requests with the same digest ask the model the same thing.

Secrets: a ``ModelRequest`` holds no API key (providers keep theirs in their HTTP
client), but ``options.extra`` may carry anything; in it, at any depth, the value of
every entry whose name is a credential's — ``api_key``, ``accessToken``,
``clientSecret``, ``X-Api-Key``, ``refresh_token``, ``privateKey``, ``password``,
``Authorization``, ``Cookie``…, matched case- and separator-insensitively — is written
as ``"[redacted]"``, and so is every piece of a string that has the shape of a
well-known token (GitHub ``ghp_…``/``github_pat_…``, OpenAI ``sk-…``, Anthropic
``sk-ant-…``, AWS ``AKIA…``, Google ``AIza…``, Slack ``xoxb-…``, JSON Web Tokens,
``Bearer …``/``Basic …`` credentials). Message contents are recorded as they are: do
not record a session whose prompts or tool results hold secrets.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import attrs

from .._core import (
    Message,
    ModelRequest,
    TranscriptFormatError,
    TrioAgentError,
    from_jsonable,
    to_jsonable,
)
from .._core import events as ev
from .._store import AppendFile, HeaderError, JsonLines, LineFormat
from ._redact import redact

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "FORMAT",
    "VERSION",
    "Cassette",
    "CassetteFormatError",
    "CassetteRecord",
    "EndKind",
    "RecordedEvent",
    "StreamEnd",
    "canonical_request",
    "load_cassette",
    "message_differences",
    "record_line",
    "request_differences",
    "request_digest",
]

CASSETTE: Final = LineFormat("trio-agent-cassette", 1)
"""The cassette file format: its header's name and version."""
FORMAT: Final = "trio-agent-cassette"
VERSION: Final = CASSETTE.version
HEADER_LINE: Final = CASSETTE.header_line.decode().strip()

EndKind: TypeAlias = Literal["done", "error", "raised", "ended", "cancelled", "left"]
"""How a recorded stream ended:

- ``done`` / ``error``: a ``Done`` / ``Error`` event arrived (the first one counts);
- ``raised``: the model raised an exception (its class name and message are kept);
- ``ended``: the stream ended without a terminal event (a malformed stream);
- ``cancelled``: the consumer's cancel scope cancelled it (an abort, a deadline, the
  loop's ``stream_idle_timeout``) before a terminal event;
- ``left``: the consumer stopped reading before a terminal event, without a cancel.
"""


class CassetteFormatError(TrioAgentError, ValueError):
    """A cassette file that cannot be read: no header, an unknown version, a bad line.

    Attributes:
        line: the 1-based line of the file (the header is line 1), when known.
        path: where in that line's JSON the first bad value is, like ``$.events[2].event``.
    """

    def __init__(self, message: str, *, line: int | None = None, path: str = "$") -> None:
        super().__init__(message)
        self.line = line
        self.path = path


@attrs.frozen(kw_only=True)
class RecordedEvent:
    """One assistant event, ``at`` seconds (trio clock) after the stream was opened.

    Attributes:
        at: seconds from the stream's opening to this event, on trio's clock.
        event: the assistant event, as the model streamed it.
    """

    at: float
    event: ev.AssistantEvent


@attrs.frozen(kw_only=True)
class StreamEnd:
    """How a recorded stream ended, ``at`` seconds after it was opened.

    ``error_type`` and ``error_message`` are set for ``kind="raised"``: the class name and
    the text of the exception the model raised.

    Attributes:
        kind: how it ended (see ``EndKind``).
        at: seconds from the stream's opening to its end, on trio's clock.
        error_type: the class name of the exception raised, for ``raised``; else None.
        error_message: its text, for ``raised``; else None.
    """

    kind: EndKind
    at: float
    error_type: str | None = None
    error_message: str | None = None


@attrs.frozen(kw_only=True)
class CassetteRecord:
    """One request and the stream that answered it.

    ``index`` is the 0-based order in which the requests were made (records of
    concurrent streams may be written out of order; :func:`load_cassette` sorts them).

    Attributes:
        index: the request's 0-based position among the session's requests.
        digest: ``request_digest(request)``: what a strict replay compares.
        request: the request, as the model received it (credentials redacted).
        events: every event of the stream, with its offset.
        end: how the stream ended.
    """

    index: int
    digest: str
    request: ModelRequest
    events: tuple[RecordedEvent, ...]
    end: StreamEnd


@attrs.frozen(kw_only=True)
class Cassette:
    """A loaded cassette: its format ``version`` and its records, in request order.

    Attributes:
        records: one record per request, sorted by ``index``.
        version: the cassette format's version (from its header line).
        path: the file it was loaded from; None for one built in memory.
        torn_line: the 1-based line of a torn last record that :func:`load_cassette`
            left out (a crash or a full disk cut it while it was written), else None.
        torn_reason: why that line could not be read.
    """

    records: tuple[CassetteRecord, ...]
    version: int = VERSION
    path: Path | None = None
    torn_line: int | None = None
    torn_reason: str | None = None


# --- canonical requests, digests, differences ------------------------------------------


def request_to_json(request: ModelRequest) -> dict[str, Any]:
    """The request as JSON values, as a cassette stores it (``options.extra`` redacted)."""
    data: dict[str, Any] = to_jsonable(request, ModelRequest)
    options = data.get("options")
    if isinstance(options, dict) and options.get("extra"):
        options["extra"] = redact(options["extra"])
    if isinstance(options, dict) and options.get("context_window", 0) is None:
        # Never sent to a provider: unset, it is left out, so that cassettes recorded
        # before the option existed keep their digests.
        del options["context_window"]
    return data


def canonical_request(request: ModelRequest | Mapping[str, Any]) -> dict[str, Any]:
    """What the digest covers: the stored request without what no model sees.

    Message timestamps and the ``details`` of tool results are left out (providers never
    send them), and so is an ``output`` of None; ``options.extra`` is redacted. Option
    fields added after the format's version 1 (``cache``) are left out at their
    defaults, so the digests of requests that do not use them are the ones version 1
    wrote.
    """
    data = request_to_json(request) if isinstance(request, ModelRequest) else dict(request)
    data["messages"] = [_canonical_message(m) for m in data.get("messages", ())]
    options = data.get("options")
    if isinstance(options, dict):
        data["options"] = {
            k: v for k, v in options.items() if k not in _LATER_OPTIONS or v != _LATER_OPTIONS[k]
        }
    if data.get("output") is None:
        # A request that asks for no structured output digests as requests did before
        # ``ModelRequest.output`` existed: recorded cassettes still match.
        data.pop("output", None)
    return data


_LATER_OPTIONS: dict[str, Any] = {"cache": None}
"""``ModelOptions`` fields added after version 1, with their defaults."""


def _canonical_message(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    m = {k: v for k, v in data.items() if k != "timestamp"}
    if m.get("role") == "tool_result":
        m.pop("details", None)
    return m


def _canonical_text(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def request_digest(request: ModelRequest | Mapping[str, Any]) -> str:
    """A stable digest of what the request asks (``sha256:`` and 64 hex digits).

    Equal for two requests that differ only in message timestamps or tool-result
    ``details``; stable across runs, processes and versions of this format.
    """
    text = _canonical_text(canonical_request(request))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value) if isinstance(value, str) else _canonical_text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _diff(path: str, recorded: Any, got: Any, out: list[str], limit: int) -> None:
    if len(out) >= limit or recorded == got:
        return
    if isinstance(recorded, dict) and isinstance(got, dict):
        for key in sorted(recorded.keys() | got.keys(), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in got:
                out.append(f"{sub}: recorded {_show(recorded[key])}, got nothing")
            elif key not in recorded:
                out.append(f"{sub}: recorded nothing, got {_show(got[key])}")
            else:
                _diff(sub, recorded[key], got[key], out, limit)
            if len(out) >= limit:
                return
        return
    if isinstance(recorded, list) and isinstance(got, list):
        for i, (a, b) in enumerate(zip(recorded, got, strict=False)):
            _diff(f"{path}[{i}]", a, b, out, limit)
            if len(out) >= limit:
                return
        n, m = len(recorded), len(got)
        if n > m:
            out.append(
                f"{path}[{m}]: recorded {_show(recorded[m])}, got nothing ({n} vs {m} items)"
            )
        elif m > n:
            out.append(f"{path}[{n}]: recorded nothing, got {_show(got[n])} ({n} vs {m} items)")
        return
    if isinstance(recorded, str) and isinstance(got, str):
        # Long texts that differ late would show the same cut-off start: show both
        # from a little before the first character that differs.
        same = next(
            (i for i, (a, b) in enumerate(zip(recorded, got, strict=False)) if a != b),
            min(len(recorded), len(got)),
        )
        start = max(0, same - 20)
        if start > 10:
            out.append(
                f"{path or '$'}: from character {start + 1}: recorded …{_show(recorded[start:])}, "
                f"got …{_show(got[start:])}"
            )
            return
    out.append(f"{path or '$'}: recorded {_show(recorded)}, got {_show(got)}")


def request_differences(
    recorded: ModelRequest | Mapping[str, Any],
    got: ModelRequest | Mapping[str, Any],
    *,
    limit: int = 5,
) -> list[str]:
    """Where two requests differ, as readable lines (at most ``limit``), in field order.

    Each line names the field by its path and shows both values, like
    ``messages[3].content[0].text: recorded 'x', got 'y'``; two long texts that differ
    late are shown from a little before their first difference (``… from character
    81: recorded …'…', got …'…'``). Compares what the digest
    covers (timestamps and tool-result ``details`` ignored); empty when they match.
    """
    out: list[str] = []
    _diff("", canonical_request(recorded), canonical_request(got), out, limit)
    return out


def message_differences(
    recorded: Sequence[Message], got: Sequence[Message], *, limit: int = 5
) -> list[str]:
    """Where two transcripts differ, as :func:`request_differences` reports requests:
    paths like ``[3].content[0].text``; timestamps and tool-result ``details`` ignored."""
    out: list[str] = []
    a = [_canonical_message(to_jsonable(m, Message)) for m in recorded]
    b = [_canonical_message(to_jsonable(m, Message)) for m in got]
    _diff("", a, b, out, limit)
    return out


# --- reading and writing ----------------------------------------------------------------


def record_line(record: CassetteRecord) -> str:
    """One record as one line of JSON text (with its newline)."""
    data = {
        "index": record.index,
        "digest": record.digest,
        "request": request_to_json(record.request),
        "events": [
            {"at": round(e.at, 6), "event": to_jsonable(e.event, ev.AssistantEvent)}
            for e in record.events
        ],
        "end": to_jsonable(attrs.evolve(record.end, at=round(record.end.at, 6)), StreamEnd),
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"


def _bad(where: str, line: int, what: str, path: str = "$") -> CassetteFormatError:
    return CassetteFormatError(f"{where}:{line}: {what}", line=line, path=path)


def _header_error(exc: HeaderError, where: str) -> CassetteFormatError:
    """How a cassette reader words a first line that is not a cassette header."""
    if exc.kind == "empty":
        return _bad(where, 1, f"empty file; a cassette starts with the line {HEADER_LINE}")
    if exc.kind == "no_version":
        return _bad(
            where, 1, f"the header has no integer version (got {exc.version!r})", "$.version"
        )
    if exc.kind == "version":
        return _bad(
            where,
            1,
            f"cassette format version {exc.version} is not supported (this trio-agent reads "
            f"version {VERSION}; upgrade trio-agent to replay it)",
            "$.version",
        )
    return _bad(where, 1, f"not a trio-agent cassette: the first line must be {HEADER_LINE}")


def _parse_record(data: Any, where: str, line: int) -> CassetteRecord:
    if not isinstance(data, dict):
        raise _bad(where, line, f"expected a JSON object, got {type(data).__name__}")
    try:
        record: CassetteRecord = from_jsonable(data, CassetteRecord)
    except TranscriptFormatError as exc:
        raise _bad(where, line, str(exc), exc.path) from None
    return record


def load_cassette(path: str | os.PathLike[str]) -> Cassette:
    """Read the cassette file ``path``, one line at a time. Blocks (file I/O).

    A torn last line — a record cut short by a crash or a full disk while it was
    written: not UTF-8 JSON text — is left out, and reported in
    ``Cassette.torn_line``; the records before it load. Blank lines are skipped.

    Raises:
        CassetteFormatError: no cassette header, a format version this code does not
            read (a newer one), or a line that is not a record anywhere but at the end
            (``.line`` names it); also a last line that is JSON but not a record (a
            crash cannot write that).
        OSError: the file cannot be read.
    """
    target = Path(path)
    where = str(target)
    with target.open("rb") as f:
        try:
            version = CASSETTE.read_first_line(f)
        except HeaderError as exc:
            raise _header_error(exc, where) from None
        lines = JsonLines(f, where, skip_blank=True, bad_line=_bad)
        records = [_parse_record(data, where, number) for number, data in lines]
    records.sort(key=lambda r: r.index)
    return Cassette(
        records=tuple(records),
        version=version,
        path=target,
        torn_line=lines.torn_line,
        torn_reason=lines.torn_reason,
    )


def write_records(path: Path, records: Iterable[CassetteRecord], *, truncate: bool) -> None:
    """Append ``records`` to ``path`` (one ``write`` each; the file is opened as every
    versioned JSONL file is, its header checked, or written when new); with
    ``truncate`` start anew with the header. Blocks (file I/O; a few kilobytes, no
    fsync).

    A record that cannot be written whole (a full disk) is cut back off, so that the
    file holds whole lines only, and the ``OSError`` is raised; the records before it
    stay.

    Raises:
        OSError: the file cannot be written.
        CassetteFormatError: ``path`` holds something else than a cassette.
    """
    lines = [record_line(record).encode() for record in records]
    try:
        file, _ = AppendFile.open(path, CASSETTE, fresh=truncate, durable=False)
    except HeaderError as exc:
        raise _header_error(exc, str(path)) from None
    try:
        for data in lines:
            file.append(data, sync=False)
    finally:
        file.close()
