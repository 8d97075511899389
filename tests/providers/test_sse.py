"""The event-stream decoder (sans-IO): line ends, splits anywhere, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent.providers._sse import SSEDecoder, SSEEvent, SSETooLarge


def decode(*chunks: bytes, limit: int = 1 << 20) -> list[SSEEvent]:
    decoder = SSEDecoder(max_event_bytes=limit)
    out: list[SSEEvent] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    return out


def test_fields_comments_and_multiline_data() -> None:
    body = (
        b": a comment, like OpenRouter's keep-alives\n"
        b"event: content_block_delta\n"
        b"id: 7\n"
        b"retry: 1000\n"
        b'data: {"a":\n'
        b"data:  1}\n"
        b"\n"
        b"data\n"
        b"\n"
        b"event: only-a-name\n"
        b"\n"
        b"data: last\n\n"
    )
    assert decode(body) == [
        SSEEvent(event="content_block_delta", data='{"a":\n 1}'),
        SSEEvent(data=""),
        # An event without data is not dispatched (and its name does not leak).
        SSEEvent(data="last"),
    ]


def test_bom_is_dropped() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n") == [SSEEvent(data="x")]


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_every_line_end(eol: bytes) -> None:
    body = b"event: e" + eol + b"data: 1" + eol + eol + b"data: 2" + eol + eol
    assert decode(body) == [SSEEvent(event="e", data="1"), SSEEvent(data="2")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SSEEvent(data="a\nb")]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c"])
def test_only_cr_and_lf_end_lines(char: str) -> None:
    data = '{"text": "a' + char + 'b"}'
    assert decode(f"data: {data}\n\n".encode()) == [SSEEvent(data=data)]


def test_multibyte_characters_split_between_chunks() -> None:
    body = "data: é — 日本 \u2028 🙂\n\n".encode()
    chunks = [body[i : i + 1] for i in range(len(body))]
    assert decode(*chunks) == [SSEEvent(data="é — 日本 \u2028 🙂")]


def test_event_size_is_bounded() -> None:
    with pytest.raises(SSETooLarge, match="100-byte limit"):
        decode(b"data: " + b"x" * 60 + b"\n" + b"data: " + b"y" * 60 + b"\n\n", limit=100)
    # Counted per event: many small events are fine.
    assert len(decode(b"data: " + b"x" * 60 + b"\n\n" * 1, b"data: z\n\n" * 50, limit=100)) == 51


def test_unfinished_line_is_bounded() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    decoder.feed(b"data: " + b"x" * 50)
    with pytest.raises(SSETooLarge):
        decoder.feed(b"x" * 60)


def test_pending_at_the_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n") == [SSEEvent(data="a")]
    assert decoder.pending
    done = SSEDecoder()
    done.feed(b"data: a\n\n")
    assert not done.pending


_text = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20
)
_events = st.lists(
    st.tuples(
        st.one_of(st.just(""), _text.filter(lambda s: ":" not in s)),
        st.lists(_text, min_size=1, max_size=3),
    ),
    max_size=6,
)


@given(
    events=_events,
    eol=st.sampled_from(["\n", "\r", "\r\n"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_split_gives_the_same_events(
    events: list[tuple[str, list[str]]], eol: str, cuts: list[int]
) -> None:
    lines: list[str] = []
    expected: list[SSEEvent] = []
    for name, data in events:
        if name:
            lines.append(f"event: {name}")
        lines.extend(f"data: {d}" for d in data)
        lines.append("")
        expected.append(SSEEvent(event=name or "message", data="\n".join(data)))
    body = (eol.join(lines) + eol).encode() if lines else b""
    points = sorted({min(c, len(body)) for c in cuts})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert decode(*chunks) == expected
