"""API keys and credentials in ``base_url`` never leave a provider, in any form; a key
with surrounding whitespace (read from a file) works — against a real server on
127.0.0.1."""

from __future__ import annotations

import json
import socket
import urllib.parse
from typing import TYPE_CHECKING

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.kit.http_server import Handler, Received, Responder, error, frames, recorded
from tests.kit.providers import FAST, KEY, KEY_ENVS, TEXT_STREAMS, collect, final, make_model
from trio_agent import Done, Error
from trio_agent.providers import Anthropic, HTTPOptions, OpenAIChat, RetryPolicy
from trio_agent.providers._secrets import MIN_RUN, Secret

if TYPE_CHECKING:
    from tests.kit.http_server import Server

PROVIDERS = ["openai", "anthropic", "responses", "gemini"]
STREAM = TEXT_STREAMS
HEADER = {
    "openai": "authorization",
    "responses": "authorization",
    "anthropic": "x-api-key",
    "gemini": "x-goog-api-key",
}
# A key whose escaped forms differ from the raw one (JSON, repr, URL encoding).
ODD_KEY = 'sk-odd"quote\\back/slash+plus=eq-0123456789abcdefXYZ'


def forms(key: str) -> list[str]:
    return [
        key,
        json.dumps(key)[1:-1],
        repr(key)[1:-1],
        repr(key.encode())[2:-1],
        urllib.parse.quote(key, safe=""),
    ]


def assert_hidden(text: str, key: str) -> None:
    """No piece of 6 consecutive characters of any form of ``key`` is in ``text`` (the
    ``[redacted]`` marks apart: a piece may not run across one)."""
    assert MIN_RUN == 6
    parts = text.split("[redacted]")
    for form in forms(key):
        for i in range(len(form) - MIN_RUN + 1):
            piece = form[i : i + MIN_RUN]
            assert not any(piece in part for part in parts), (piece, text)


def echo(key: str) -> str:
    """What a server may say about a rejected key: every form, and parts of it."""
    return (
        f"Incorrect API key provided: {key}. As JSON: {json.dumps(key)}; repr {key!r}; "
        f"bytes {key.encode()!r}; in a URL ?key={urllib.parse.quote(key, safe='')}; "
        f"starts {key[:20]}…, ends …{key[-12:]}, middle …{key[9:29]}…"
    )


def auth_header(kind: str, received: Received) -> str:
    return received.headers[HEADER[kind]]


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("key", [KEY, ODD_KEY])
async def test_a_401_echoing_the_key_in_every_form_shows_none(
    kind: str, key: str, server: Server
) -> None:
    body = {"error": {"message": echo(key), "type": "authentication_error"}}
    if kind == "anthropic":
        body["type"] = "error"
    server.add(error(401, body))
    async with make_model(kind, server.url, api_key=key) as model:
        events = await collect(model)
    assert isinstance(events[-1], Error)
    text = final(events).error_message or ""
    assert "HTTP 401" in text
    assert "authentication_error: Incorrect API key provided: [redacted]" in text
    assert_hidden(text, key)
    assert_hidden(repr(events), key)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_key_echoed_in_a_plain_text_body_or_mid_stream_is_hidden(
    kind: str, server: Server
) -> None:
    async def plain(request: Received, r: Responder) -> None:
        page = f"denied for {ODD_KEY!r} ({json.dumps(ODD_KEY)})".encode()
        head = f"HTTP/1.1 403 No\r\ncontent-type: text/plain\r\ncontent-length: {len(page)}"
        await r.stream.send_all(head.encode() + b"\r\n\r\n" + page)

    server.add(plain)
    async with make_model(kind, server.url, api_key=ODD_KEY) as model:
        text = final(await collect(model)).error_message or ""
    assert "HTTP 403" in text
    assert_hidden(text, ODD_KEY)


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("padding", [("", "\n"), ("  ", "\r\n"), ("\t", " ")])
async def test_whitespace_around_a_key_is_stripped(
    kind: str, padding: tuple[str, str], server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key read from a file ends with a newline: the HTTP layer refused the header
    (and the error showed the key escaped). It is stripped when read: from the argument
    and from the environment."""
    padded = padding[0] + KEY + padding[1]
    expected = f"Bearer {KEY}" if HEADER[kind] == "authorization" else KEY
    server.add(recorded(STREAM[kind]), recorded(STREAM[kind]))
    async with make_model(kind, server.url, api_key=padded) as model:
        events = await collect(model)
    assert isinstance(events[-1], Done), final(events).error_message
    monkeypatch.setenv(KEY_ENVS[kind], padded)
    async with make_model(kind, server.url, api_key=None) as model:
        events = await collect(model)
    assert isinstance(events[-1], Done), final(events).error_message
    assert [auth_header(kind, r) for r in server.requests] == [expected, expected]


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_key_the_http_layer_refuses_is_not_shown(kind: str, server: Server) -> None:
    """A line break inside the key: the header cannot be sent, and the error (which
    shows the refused header as bytes) hides the key."""
    key = "tok\nen-abc123-XYZ-0123456789"
    async with make_model(kind, server.url, api_key=key) as model:
        text = final(await collect(model)).error_message or ""
    assert "could not be sent" in text or "failed" in text
    assert "[redacted]" in text
    assert_hidden(text, key)
    assert not server.requests


def test_whitespace_only_key_is_no_key() -> None:
    assert "api_key=<unset>" in repr(OpenAIChat("m", base_url="http://h/v1", api_key=" \n"))


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_credentials_in_base_url_are_shown_nowhere(kind: str, server: Server) -> None:
    secret = "url-secret-0123456789abcdef"
    url = server.url.replace("http://", f"http://someone:{secret}@")
    model = make_model(kind, url)
    assert secret not in repr(model)
    assert "someone" not in repr(model)
    assert f"base_url='{server.url}" in repr(model)
    body = {"error": {"message": f"user someone, password {secret} is wrong"}}
    server.add(error(401, body))
    async with model:
        text = final(await collect(model)).error_message or ""
    assert "HTTP 401" in text
    assert_hidden(text, secret)
    # The credentials still went to the server (as HTTP basic auth).
    assert server.requests[0].headers.get("authorization", "").startswith("Basic ")


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_token_as_the_url_user_name_is_hidden_when_unreachable(kind: str) -> None:
    token = "tok-0123456789abcdef"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = attrs.evolve(FAST, retry=RetryPolicy(max_retries=0))
    async with make_model(kind, f"http://{token}@127.0.0.1:{port}", http=http) as model:
        text = final(await collect(model)).error_message or ""
        assert token not in repr(model)
    assert f"cannot connect to http://127.0.0.1:{port}" in text
    assert_hidden(text, token)


@pytest.mark.parametrize("bad", ["ftp://user:pw-0123456789@host/", "http://user:pw-0123456789@"])
def test_an_invalid_base_url_error_does_not_show_its_credentials(bad: str) -> None:
    with pytest.raises(ValueError, match="base_url") as info:
        Anthropic("m", base_url=bad)
    assert "pw-0123456789" not in str(info.value)
    assert "user" not in str(info.value)


# Upper case, digits and characters that escape differently in JSON, repr and URLs; no
# lower case, so no window of a key can be a piece of the fixed words around it.
KEY_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_\"'\\/+=%\n\t"


@given(
    key=st.text(KEY_CHARACTERS, min_size=6, max_size=64).filter(lambda k: k == k.strip()),
    cut=st.integers(0, 64),
)
def test_redaction_hides_every_form_and_every_part_of_any_key(key: str, cut: int) -> None:
    text = echo(key) + f" / head {key[:cut]} / tail {key[cut:]} / "
    hidden = Secret(key).redact(text)
    for part in (key[:cut], key[cut:]):
        if len(part) >= MIN_RUN:
            assert_hidden(hidden, part)
    assert_hidden(hidden, key)
    assert "[redacted]" in hidden


def fragments(key: str) -> str:
    """What servers say about a rejected key, in pieces: OpenAI's prefix...suffix, a
    masked one, middle pieces, the whole key, quoted."""
    n = len(key)
    return (
        f"Incorrect API key provided: {key[:6]}...{key[-4:]}. Key {key[:3]}***{key[-6:]} "
        f"is not valid; middle {key[n // 3 : n // 3 + 6]} and {key[5 : n - 5]}; "
        f"whole {key}; quoted {json.dumps(key)}"
    )


def echo_fragments(
    header: str | None = None, extra: str = "", *, mid_stream: bool = False
) -> Handler:
    """A 401 from the real server whose message echoes, in pieces, the key it received
    (or the value of request header ``header``), then ``extra``; with ``mid_stream``,
    an error frame in a 200 event stream instead."""

    async def handler(request: Received, r: Responder) -> None:
        if header is not None:
            key = request.headers[header]
        elif "authorization" in request.headers:
            key = request.headers["authorization"].removeprefix("Bearer ")
        else:
            key = request.headers.get("x-api-key") or request.headers["x-goog-api-key"]
        message = fragments(key) + extra
        body = {"type": "error", "error": {"type": "invalid_key", "message": message}}
        if not mid_stream:
            await r.json(401, body)
            return
        await r.head()
        await r.body(frames(body, named=True).encode())
        await r.end()

    return handler


# A key of OpenAI's live shape; and one whose pieces are ordinary words.
LIVE_KEY = "sk-live-4f9c2Qm8TzR1vXy7Lk3N0bHd5WsPg6E"
WORDY_KEY = "sk-please-provided-answer-secret-Pg6E"


@pytest.mark.parametrize("kind", PROVIDERS)
@pytest.mark.parametrize("key", [KEY, ODD_KEY, LIVE_KEY, WORDY_KEY])
@pytest.mark.parametrize("mid_stream", [False, True])
async def test_a_server_echoing_pieces_of_the_key_shows_no_piece_of_six(
    kind: str, key: str, mid_stream: bool, server: Server
) -> None:
    server.add(echo_fragments(mid_stream=mid_stream))
    async with make_model(kind, server.url, api_key=key) as model:
        events = await collect(model)
    text = final(events).error_message or ""
    assert auth_header(kind, server.requests[0]).removeprefix("Bearer ") == key
    if mid_stream:
        assert "the server reported an error mid-stream: invalid_key: " in text
    else:
        assert "HTTP 401" in text
    assert_hidden(text, key)
    # Pieces shorter than six characters may stay: OpenAI's "sk-liv...Pg6E" keeps "Pg6E".
    if key != WORDY_KEY:
        assert f"Incorrect API key provided: [redacted]...{key[-4:]}." in text
        assert_hidden(repr(events), key)  # the events hold the key nowhere else
    else:
        # The rule is six characters of the key, whatever they spell: an ordinary word
        # of the message that holds a piece of the key goes too.
        assert f"Incorrect API key [redacted]: [redacted]...{key[-4:]}." in text


ORG_TOKEN = "org-tok-7Hq2Zp9Wm4Kx"


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_the_values_of_extra_headers_are_hidden_like_the_key(
    kind: str, server: Server
) -> None:
    server.add(echo_fragments("x-org-token", extra=" (debug flag: true)"))
    headers = {"X-Org-Token": ORG_TOKEN, "X-Debug": "true"}
    async with make_model(kind, server.url, headers=headers) as model:
        text = final(await collect(model)).error_message or ""
    assert server.requests[0].headers["x-org-token"] == ORG_TOKEN
    assert "HTTP 401" in text
    assert_hidden(text, ORG_TOKEN)
    # A value shorter than six characters cannot be echoed in a piece of six: an
    # ordinary word like it stays.
    assert text.endswith("(debug flag: true)")


# Key characters as real keys have them.
REAL_KEY_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@given(
    key=st.text(REAL_KEY_CHARACTERS, min_size=6, max_size=80),
    windows=st.lists(st.tuples(st.integers(0, 80), st.integers(MIN_RUN, 80)), max_size=6),
    words=st.lists(st.sampled_from(["error", "key", "the", "provided", " ", "...", ":"])),
)
def test_no_window_of_six_or_more_key_characters_survives(
    key: str, windows: list[tuple[int, int]], words: list[str]
) -> None:
    pieces = [key[i : i + size] for i, size in windows]
    pieces = [p for p in pieces if len(p) >= MIN_RUN] or [key]
    text = " ".join(words) + " " + " | ".join(pieces) + " " + "".join(words)
    hidden = Secret(key).redact(text)
    assert_hidden(hidden, key)


def test_timeouts_are_checked() -> None:
    with pytest.raises(ValueError, match="idle_timeout"):
        HTTPOptions(idle_timeout=0)
    with pytest.raises(ValueError, match="progress_timeout"):
        HTTPOptions(progress_timeout=-1)


@pytest.mark.parametrize("kind", PROVIDERS)
async def test_an_error_body_nested_too_deeply_is_shown_cut_with_the_key_hidden(
    kind: str, server: Server
) -> None:
    async def deep(request: Received, r: Responder) -> None:
        page = ('{"error": ' + f"{json.dumps(LIVE_KEY)}, " + '"x": ' + "[" * 100_000).encode()
        head = f"HTTP/1.1 401 No\r\ncontent-type: application/json\r\ncontent-length: {len(page)}"
        await r.stream.send_all(head.encode() + b"\r\n\r\n" + page)

    server.add(deep)
    async with make_model(kind, server.url, api_key=LIVE_KEY) as model:
        text = final(await collect(model)).error_message or ""
    assert text.startswith("HTTP 401 No from http://127.0.0.1:")
    assert ': {"error": "[redacted]", "x": [[[[' in text
    assert text.endswith("[…")
    assert "RecursionError" not in text
    assert_hidden(text, LIVE_KEY)
