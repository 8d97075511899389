"""MCP values to ours: the tool filters, a call's result to ``ToolOutput``."""

from __future__ import annotations

import json
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

__all__ = ["error_output", "fits", "to_output", "wanted"]


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


def to_output(result: CallToolResult, max_chars: int | None) -> ToolOutput:
    """A call's result as ours: text → ``Text``, images → ``Image``, ``is_error`` → an
    error result, the text cut to ``max_chars`` characters (``None``: not cut).

    Structured content becomes the result's ``structured_content`` (JSON data beside
    the text, for programs; not sent to the model) when it fits in ``max_chars``
    characters of JSON, so that what a result stores stays bounded; a larger one is not
    kept, and the content says so unless its text already says the same (its JSON, or
    the plain value the SDK's servers wrap as ``{"result": value}``). With no content
    blocks beside it, it is also shown to the model as JSON text (the MCP rule for older
    clients is to send both; not every server does).

    Cost: linear in the text; the structured content is looked at only up to
    ``max_chars``.
    """
    blocks = [_block(b) for b in result.content]
    structured: Any = result.structured_content
    kept: Any = None
    dropped = False
    if structured is not None:
        if not blocks:
            blocks = [Text(text=json.dumps(structured, ensure_ascii=False))]
        if fits(structured, max_chars):
            kept = structured
        elif not _repeats(blocks, structured, max_chars):
            dropped = True
    content = _cut(blocks, max_chars, dropped)
    return ToolOutput(content=content, structured_content=kept, is_error=bool(result.is_error))


def fits(value: Any, max_chars: int | None) -> bool:
    """Whether ``value`` (a JSON value) takes at most ``max_chars`` characters as JSON,
    about. Stops as soon as it knows, so costs O(min(size, max_chars))."""
    if max_chars is None:
        return True
    budget = max_chars
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            budget -= len(item) + 2
        elif isinstance(item, dict):
            budget -= 2
            for key, inner in item.items():
                budget -= len(key) + 4
                stack.append(inner)
        elif isinstance(item, list | tuple):
            budget -= 2 + len(item)
            stack.extend(item)
        else:
            budget -= len(repr(item)) if isinstance(item, int | float) else 5
        if budget < 0:
            return False
    return True


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _repeats(blocks: list[Text | Image], structured: Any, max_chars: int | None) -> bool:
    """Whether the text blocks say what ``structured`` says: its JSON, or the value of
    the SDK's ``{"result": value}`` wrapper (as it is, as JSON, or one block per item of
    a list). Texts longer than a few times ``max_chars`` are compared, not parsed."""
    texts = [b.text for b in blocks if isinstance(b, Text)]
    parse = max_chars is None or sum(map(len, texts)) <= 8 * max_chars + 1024

    def same(text: str, value: Any) -> bool:
        return text == value or (parse and _parsed(text) == value)

    if len(texts) == 1 and parse and _parsed(texts[0]) == structured:
        return True
    if not (isinstance(structured, dict) and structured.keys() == {"result"}):
        return False
    value = structured["result"]
    if len(texts) == 1 and same(texts[0], value):
        return True
    return (
        isinstance(value, list)
        and len(value) == len(texts)
        and all(same(t, v) for t, v in zip(texts, value, strict=True))
    )


def _cut(blocks: list[Text | Image], max_chars: int | None, dropped: bool) -> list[Text | Image]:
    """The text cut to its first ``max_chars`` characters (images kept), with a last
    block saying what was cut."""
    total = sum(len(b.text) for b in blocks if isinstance(b, Text))
    if (max_chars is None or total <= max_chars) and not dropped:
        return blocks
    out: list[Text | Image] = []
    budget = total if max_chars is None else max_chars
    for block in blocks:
        if isinstance(block, Text):
            if budget <= 0:
                continue
            if len(block.text) > budget:
                block = Text(text=block.text[:budget])
            budget -= len(block.text)
        out.append(block)
    notes = []
    if max_chars is not None and total > max_chars:
        notes.append(f"result cut: showing the first {max_chars:,} of {total:,} characters")
    if dropped:
        notes.append(f"its structured content (over {max_chars:,} characters) is not kept")
    out.append(Text(text=f"\n\n[{'; '.join(notes)}]"))
    return out
