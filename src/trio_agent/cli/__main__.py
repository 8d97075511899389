"""``python -m trio_agent.cli``: the ``trio-agent`` command."""

import sys

from . import main

sys.exit(main())
