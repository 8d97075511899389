"""``python -m trio_agent``: the ``trio-agent`` command (the same sub-commands, options
and exit codes)."""

import sys

from .cli import main

sys.exit(main())
