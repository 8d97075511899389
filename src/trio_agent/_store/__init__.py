"""Files on disk: the locked durable file, JSONL transcripts.

This is the layer's surface: the public facade and the edges import what they need from
here (``from .._store import JsonlTranscript``), never from a module of the package. It
imports only from ``_core``.
"""

from ._jsonl import (
    JsonLines,
    JsonlTranscript,
    LoadedTranscript,
    UnreadableLine,
    decode_line,
    load_transcript,
    write_transcript,
)
from ._locked_file import names, open_locked, write_all

__all__ = [
    "JsonLines",
    "JsonlTranscript",
    "LoadedTranscript",
    "UnreadableLine",
    "decode_line",
    "load_transcript",
    "names",
    "open_locked",
    "write_all",
    "write_transcript",
]
