"""``python -m agent_core.cli``: the same entry point as the ``soong-agent`` console script."""

import sys

from agent_core.cli import main

sys.exit(main())
