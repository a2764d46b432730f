"""The static definitions of the six built-in ``code.*`` tools (docs/tools.md#the-code-tools).

Registered at open without importing the tools' implementations (``tools/_builtin``), which load on the
first pre-flight or call (cold start, issue 16; see ``tools/_lazy.py``). Each tool's ``definition()``
returns its entry here, so the two can never differ.
"""

from __future__ import annotations

from typing import Any

from agent_core.config.schema import ToolsSection
from agent_core.types.tools import ToolDefinition

READ_FILE = "code.read_file"
LIST_DIR = "code.list_dir"
SEARCH = "code.search"
WRITE_FILE = "code.write_file"
EDIT_FILE = "code.edit_file"
RUN_COMMAND = "code.run_command"
CODE_TOOL_NAMES: tuple[str, ...] = (READ_FILE, LIST_DIR, SEARCH, WRITE_FILE, EDIT_FILE, RUN_COMMAND)

READ_FILE_MAX_LINES_LIMIT = 1000
READ_FILE_DEFAULT_MAX_LINES = 200
READONLY_TAGS = ["code", "filesystem", "readonly"]
WRITE_TAGS = ["code", "filesystem", "write"]
_READONLY_META = {"concurrency": "parallel", "source": "code"}
_WRITE_META = {"concurrency": "serial", "source": "code"}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _path(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def code_tool_definition(name: str, tools: ToolsSection | None = None) -> ToolDefinition:
    """The definition of the built-in tool ``name`` (``code.run_command``'s timeout bounds from ``tools``)."""
    if name == READ_FILE:
        return ToolDefinition(
            name=READ_FILE,
            description=(
                "Read a UTF-8 text file by line window. Relative paths resolve against the project. Returns "
                "the selected lines joined with newlines (no line numbers); use next_start_line to page."
            ),
            input_schema=object_schema(
                {
                    "path": _path("File path (relative to the project or absolute)."),
                    "start_line": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 1,
                        "description": "1-based first line.",
                    },
                    "max_lines": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": READ_FILE_MAX_LINES_LIMIT,
                        "default": READ_FILE_DEFAULT_MAX_LINES,
                        "description": "Number of lines to return (1-1000).",
                    },
                },
                ["path"],
            ),
            permission="readonly",
            tags=list(READONLY_TAGS),
            metadata=dict(_READONLY_META),
        )
    if name == LIST_DIR:
        return ToolDefinition(
            name=LIST_DIR,
            description=(
                "List a directory. Non-recursive by default; recursive listings skip the contents of "
                ".git, node_modules, .venv, venv, dist, build, target, .next, .cache and __pycache__."
            ),
            input_schema=object_schema(
                {
                    "path": _path("Directory (relative to the project or absolute)."),
                    "recursive": {"type": "boolean", "default": False},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Maximum entries (default 1000).",
                    },
                },
                ["path"],
            ),
            permission="readonly",
            tags=list(READONLY_TAGS),
            metadata=dict(_READONLY_META),
        )
    if name == SEARCH:
        return ToolDefinition(
            name=SEARCH,
            description=(
                "Search files for a literal, case-sensitive string (no regex). Searches the project by "
                "default; glob filters file paths like ripgrep --glob (e.g. '*.py', 'src/**', '!*.md')."
            ),
            input_schema=object_schema(
                {
                    "query": {"type": "string", "description": "Literal text to find (single line)."},
                    "path": _path("Directory or file to search (default: project)."),
                    "glob": {"type": "string", "description": "ripgrep-style glob filter."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Maximum matches (default 100).",
                    },
                },
                ["query"],
            ),
            permission="readonly",
            tags=list(READONLY_TAGS),
            metadata=dict(_READONLY_META),
        )
    if name == WRITE_FILE:
        return ToolDefinition(
            name=WRITE_FILE,
            description=(
                "Write a UTF-8 text file. Fails with path_conflict if it exists unless overwrite=true; "
                "creates missing parent directories unless create_dirs=false."
            ),
            input_schema=object_schema(
                {
                    "path": _path("Target file (relative to the project or absolute)."),
                    "content": {"type": "string", "description": "Full file content."},
                    "create_dirs": {"type": "boolean", "default": True},
                    "overwrite": {"type": "boolean", "default": False},
                },
                ["path", "content"],
            ),
            permission="write",
            tags=list(WRITE_TAGS),
            metadata=dict(_WRITE_META),
        )
    if name == EDIT_FILE:
        edit_item = object_schema(
            {
                "old": {"type": "string", "description": "Exact text to replace (must match once)."},
                "new": {"type": "string", "description": "Replacement text."},
                "replace_all": {"type": "boolean", "default": False},
            },
            ["old", "new"],
        )
        return ToolDefinition(
            name=EDIT_FILE,
            description=(
                "Edit one existing text file with exact old/new replacements or a single-file unified diff "
                "(exactly one of edits / unified_diff). All-or-nothing; no rename/delete/binary patches."
            ),
            input_schema=object_schema(
                {
                    "path": _path("File to edit (relative to the project or absolute)."),
                    "edits": {"type": "array", "items": edit_item, "minItems": 1},
                    "unified_diff": {"type": "string", "description": "Unified diff for this file only."},
                    "create_if_missing": {"type": "boolean", "default": False},
                },
                ["path"],
            ),
            permission="write",
            tags=list(WRITE_TAGS),
            metadata=dict(_WRITE_META),
        )
    if name == RUN_COMMAND:
        tools = tools if tools is not None else ToolsSection()
        return ToolDefinition(
            name=RUN_COMMAND,
            description=(
                "Run a program with an argv list (no shell: no pipes, globbing or variable expansion). cwd "
                "defaults to the project and must be inside the allowed write roots; the environment is a "
                "fixed allowlist; stdin is empty."
            ),
            input_schema=object_schema(
                {
                    "argv": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": 'Program and arguments, e.g. ["python", "-m", "pytest"].',
                    },
                    "cwd": {"type": "string", "description": "Working directory (default: project)."},
                    "timeout_ms": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": tools.max_timeout_ms,
                        "description": f"Timeout in ms (default {tools.default_timeout_ms}).",
                    },
                },
                ["argv"],
            ),
            permission="write",
            tags=["code", "dangerous"],
            metadata=dict(_WRITE_META),
        )
    raise KeyError(name)


def code_tool_definitions(tools: ToolsSection) -> list[ToolDefinition]:
    """The six definitions in :data:`CODE_TOOL_NAMES` order."""
    return [code_tool_definition(name, tools) for name in CODE_TOOL_NAMES]
