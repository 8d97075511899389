"""MCP values to ours: a listed tool's name and schema, a call's result to ``ToolOutput``."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from .. import Image, Text, ToolOutput

if TYPE_CHECKING:
    from mcp.types import CallToolResult, ContentBlock

__all__ = ["error_output", "to_output", "tool_name", "wanted"]

SEPARATOR = "__"
# MCP allows dots in tool names; the model APIs (OpenAI, Anthropic) allow only these.
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(prefix: str | None, name: str) -> str:
    """The name the model sees: ``{prefix}__{name}``, or the server's name, with every
    character the model APIs refuse (``.``, ``/``...) replaced by ``_``. Calls still go
    to the server under its own name."""
    name = _NOT_ALLOWED.sub("_", name)
    return f"{prefix}{SEPARATOR}{name}" if prefix else name


def wanted(name: str, allow: frozenset[str] | None, block: frozenset[str] | None) -> bool:
    """Whether the server's tool ``name`` passes the filters (``block`` wins)."""
    if block is not None and name in block:
        return False
    return allow is None or name in allow


def error_output(text: str) -> ToolOutput:
    return ToolOutput(content=text, is_error=True)


def _block(block: ContentBlock) -> Text | Image:
    if isinstance(block, TextContent):
        return Text(text=block.text)
    if isinstance(block, ImageContent):
        return Image(data=block.data, mime_type=block.mime_type)
    if isinstance(block, AudioContent):
        return Text(text=f"[audio ({block.mime_type}) not shown]")
    if isinstance(block, ResourceLink):
        return Text(text=f"[resource link: {block.uri}]")
    assert isinstance(block, EmbeddedResource)
    res = block.resource
    if isinstance(res, BlobResourceContents):
        mime = res.mime_type or "application/octet-stream"
        if mime.startswith("image/"):
            return Image(data=res.blob, mime_type=mime)
        return Text(text=f"[binary resource {res.uri} ({mime}) not shown]")
    return Text(text=res.text)


def to_output(result: CallToolResult) -> ToolOutput:
    """A call's result as ours: text → ``Text``, images → ``Image``, structured content
    → ``details``, ``is_error`` → an error result.

    A result with structured content and no content blocks shows the model that content
    as JSON text (the MCP rule for older clients is to send both; not every server does).
    """
    blocks = [_block(b) for b in result.content]
    details: Any = result.structured_content
    if not blocks and details is not None:
        blocks = [Text(text=json.dumps(details, ensure_ascii=False))]
    return ToolOutput(content=blocks, details=details, is_error=bool(result.is_error))
