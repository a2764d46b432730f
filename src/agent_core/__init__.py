"""soong-agent: an async SDK that runs LLM agents on a real project, safely and durably."""

import logging as _logging

_logging.getLogger("agent_core").addHandler(_logging.NullHandler())
