"""Workspace tools: read, write, edit, ls, find, grep and bash, confined to one folder.

``workspace(root)`` builds them; the implementation lives in private modules
(``_paths`` confinement, ``_files``, ``_search``, ``_bash``, ``_workspace``).

They are built with ``@tool``, so a call with an argument a tool does not have (say
``read(path="a.txt", encoding="utf-8")``) is refused before the tool runs: the model gets
an error result that names the argument (``'encoding' was unexpected``) and can call
again without it. The argument is never silently dropped: that would give the model a
result it takes for what it asked (a ``grep`` it believes filtered by a glob).
"""

from ._paths import WorkspaceError as WorkspaceError
from ._workspace import workspace as workspace

__all__ = ["WorkspaceError", "workspace"]
