"""Workspace tools: read, write, edit, ls, find, grep and bash, confined to one folder.

``workspace(root)`` builds them; the implementation lives in private modules
(``_paths`` confinement, ``_files``, ``_search``, ``_bash``, ``_workspace``).
"""

from ._paths import WorkspaceError as WorkspaceError
from ._workspace import workspace as workspace

__all__ = ["WorkspaceError", "workspace"]
