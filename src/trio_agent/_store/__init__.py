"""Files on disk: the locked durable file, versioned JSONL files (the format under
transcripts, cassettes and fleet results, with its crash model), JSONL transcripts.

This is the layer's surface: the public facade and the edges import what they need from
here (``from .._store import JsonlTranscript``), never from a module of the package. It
imports only from ``_core``.
"""

from ._jsonl import (
    COMPACTION,
    JsonlTranscript,
    LoadedTranscript,
    Marker,
    carry_markers,
    compaction_marker,
    load_transcript,
    write_transcript,
)
from ._jsonl_file import (
    NO_HEADER,
    AppendFile,
    FsyncMode,
    HeaderError,
    JsonLines,
    LineFormat,
    UnreadableLine,
    check_fsync,
    decode_line,
)
from ._locked_file import names, open_locked, write_all
from ._timings import TIMINGS

__all__ = [
    "COMPACTION",
    "NO_HEADER",
    "TIMINGS",
    "AppendFile",
    "FsyncMode",
    "HeaderError",
    "JsonLines",
    "JsonlTranscript",
    "LineFormat",
    "LoadedTranscript",
    "Marker",
    "UnreadableLine",
    "carry_markers",
    "check_fsync",
    "compaction_marker",
    "decode_line",
    "load_transcript",
    "names",
    "open_locked",
    "write_all",
    "write_transcript",
]
