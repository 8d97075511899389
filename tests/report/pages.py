"""Helpers of the report tests: reading a page's data block back, building transcripts."""

from __future__ import annotations

import html.parser
import json
from typing import TYPE_CHECKING, Any

from trio_agent import JsonlTranscript, LoopConfig, run_agent_loop
from trio_agent.report._html import DATA_ID

if TYPE_CHECKING:
    from pathlib import Path

    from trio_agent import Context, Model, UserMessage


class _DataBlock(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.text: list[str] = []
        self.blocks = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script" and ("id", DATA_ID) in attrs:
            self.inside = True
            self.blocks += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.inside = False

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.text.append(data)


def page_data(page: str) -> Any:
    """The JSON of ``page``'s data block, read as an HTML parser (and so a browser) reads
    the page: a block that some text ended early fails to parse here."""
    parser = _DataBlock()
    parser.feed(page)
    assert parser.blocks == 1
    return json.loads("".join(parser.text))


async def record(
    path: Path,
    prompts: list[UserMessage],
    context: Context,
    model: Model,
    config: LoopConfig | None = None,
) -> None:
    """One run of ``model`` written to the transcript ``path`` with timings."""
    async with JsonlTranscript(path, fsync=False, timings=True) as transcript:
        await run_agent_loop(prompts, context, model, config or LoopConfig(), on_event=transcript)
