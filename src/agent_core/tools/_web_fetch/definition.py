"""The static definition of ``code.web_fetch`` (imported at open; the implementation loads on first use)."""

from __future__ import annotations

from agent_core.types.tools import ToolDefinition

NAME = "code.web_fetch"
DEFAULT_MAX_BYTES = 1_000_000
"""Response body bytes downloaded when the call names no ``max_bytes``."""
MAX_BYTES_LIMIT = 10_000_000
"""The largest ``max_bytes`` a call may ask for."""
TAGS = ["code", "network", "readonly"]


def web_fetch_definition() -> ToolDefinition:
    return ToolDefinition(
        name=NAME,
        description=(
            "Fetch a web page with an HTTP(S) GET and return it as Markdown (HTML is converted; other text "
            "as it is). Hosts that are not allow-listed need the user's permission; private and loopback "
            "addresses are refused. A redirect to another host that is not allow-listed is not followed: "
            "fetch the returned location yourself. A large page comes back as its beginning plus the path "
            "of a file with the whole Markdown, to read further with code.read_file."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "http:// or https:// URL to fetch."},
                "max_bytes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_BYTES_LIMIT,
                    "default": DEFAULT_MAX_BYTES,
                    "description": "Most response bytes to download; a longer body is cut there.",
                },
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        permission="readonly",
        tags=list(TAGS),
        metadata={"concurrency": "parallel", "source": "code"},
    )
