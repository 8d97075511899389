"""The one page shell every report uses: inline CSS and JS, the data as escaped JSON.

A report page is self-contained: no request leaves it (its Content-Security-Policy
allows no source but its own inline script and style, and ``data:`` images), no font or
script is fetched. Everything it shows that came from a transcript, a fleet or a
benchmark is in one ``<script type="application/json">`` block, written by
:func:`embed` so that no text in it can end the block or start markup, and the page's
script puts it on screen with ``textContent`` and ``setAttribute`` only — never as
markup.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any, Final

__all__ = ["DATA_ID", "embed", "page"]

DATA_ID: Final = "report-data"
"""The id of the page's data block."""

_CSP: Final = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)

# What must not appear as itself inside a <script> block: ``<`` (``</script>``,
# ``<!--``), ``>`` and ``&`` for good measure. ``ensure_ascii`` escapes U+2028 and
# U+2029 (and every other non-ASCII character, so lone surrogates a transcript may
# hold are written as escapes too).
_SCRIPT_SAFE: Final = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def embed(data: Any) -> str:
    """``data`` as JSON text that is safe inside a ``<script>`` element: ``JSON.parse``
    of it gives ``data`` back, and it holds no ``<``, ``>``, ``&`` or non-ASCII
    character.

    Raises:
        TypeError, ValueError: ``data`` is not JSON data (NaN included).
    """
    text = json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text.translate(_SCRIPT_SAFE)


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("_assets", name).read_text(encoding="utf-8")


def page(title: str, kind: str, data: Any) -> str:
    """A whole HTML page titled ``title`` that draws ``data`` with the script of
    ``kind`` (``"transcript"``, ``"fleet"`` or ``"bench"``)."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>\n{_asset('report.css')}</style>\n"
        "</head><body>\n"
        '<main id="report"></main>\n'
        '<div id="tip" role="tooltip" hidden></div>\n'
        f'<script type="application/json" id="{DATA_ID}">{embed(data)}</script>\n'
        f"<script>\n{_asset('common.js')}\n{_asset(kind + '.js')}</script>\n"
        "</body></html>\n"
    )
