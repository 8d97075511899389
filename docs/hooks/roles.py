"""A griffe extension: the Sphinx roles in our docstrings become links in the site.

The docstrings name other objects the way ``help()`` readers and Sphinx users know,
``:class:`Tool``` or ``:meth:`~AgentRun.abort```. mkdocstrings reads Markdown, where such
a role would show as literal text, so before rendering each one becomes a cross-reference,
``[`Tool`][Tool]``, resolved from the scope of the object whose docstring holds it
(``scoped_crossrefs``). One that resolves to nothing documented fails the strict build,
so a docstring cannot point users at a private or missing name.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|attr|exc|data|obj|mod):`(~?)([\w.]+?)(?:\(\))?`")


def as_link(match: re.Match[str]) -> str:
    """The Markdown cross-reference for one role (``~`` shows only the last name)."""
    short, target = match.groups()
    title = target.rsplit(".", 1)[-1] if short else target
    return f"[`{title}`][{target}]"


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring once the package is loaded."""

    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        """Rewrite ``obj``'s own docstring (not an alias's: it shares its target's)."""
        if obj.docstring is not None and not obj.is_alias:
            obj.docstring.value = ROLE.sub(as_link, obj.docstring.value)
