"""MCP in ``soong-agent chat`` (docs/hooks-and-mcp.md): prompts as slash commands, resources as
``@server:uri`` attachments, and a server's elicitation questions as a small form.

- ``/mcp`` lists every server's prompts as ``/mcp:<server>:<prompt> <arguments>``; ``/mcp resources
  <server>`` lists a server's resources.
- ``/mcp:<server>:<prompt> [value ...] [name=value ...]`` asks the server for the prompt (positional values
  fill the prompt's arguments in order) and sends its text as your next message.
- ``@<server>:<uri>`` in a message attaches that resource: the message goes out with one more text block
  per mention, ``<resource server=".." uri="..">…</resource>``. A mention of a server that is not
  configured stays plain text; a resource that cannot be read is an error line and nothing is sent.
- An elicitation request (``metadata.mcp_request == "elicitation"``) asks each field of the server's
  schema in turn (type-checked; Enter skips an optional field; ``!decline`` declines, ``!cancel``
  cancels); URL mode shows the URL and asks whether you finished there.
"""

from __future__ import annotations

import html
import re
import shlex
from typing import TYPE_CHECKING, Any, Protocol

from agent_core.cli._chat_render import cut, safe

if TYPE_CHECKING:
    from agent_core._api.runtime import AgentRuntime
    from agent_core.cli._chat_input import LineInput
    from agent_core.cli._chat_render import ChatPrinter
    from agent_core.cli._terminal import Output
    from agent_core.types.permissions import PermissionDecision, PermissionRequest
    from agent_core.types.runtime import UserMessage


class ChatSession(Protocol):
    """What these commands use of the chat (``agent_core.cli._chat_session.ChatSession``)."""

    printer: ChatPrinter
    prompt_out: Output
    input: LineInput | None
    permission_asked: bool

    async def ready(self) -> AgentRuntime: ...

    def note(self, text: str) -> None: ...

    async def turn(self, message: str) -> None: ...


MENTION = re.compile(r"(?<![\w.@/])@([A-Za-z0-9_-]{1,64}):(\S+)")
PROMPT_COMMAND = re.compile(r"^/mcp:([A-Za-z0-9_-]{1,64}):(\S+)$")


async def mcp_command(chat: ChatSession, args: list[str]) -> None:
    runtime = await chat.ready()
    if args[:1] == ["resources"]:
        if len(args) != 2:
            chat.printer.line("error: usage: /mcp resources <server>")
            return
        resources = await runtime.mcp_resources(args[1])
        if not resources:
            chat.note(f"MCP server {safe(args[1])} has no resources")
            return
        chat.printer.block(
            [
                f"@{safe(r.server_id)}:{safe(r.uri)}{' (template)' if r.template else ''}  "
                f"{safe(cut(r.description or r.name, 80))}"
                for r in resources
            ]
        )
        return
    prompts = await runtime.mcp_prompts()
    if not prompts:
        chat.note("no MCP prompts (servers are configured in mcp.json of the home)")
        return
    lines = []
    for p in prompts:
        params = " ".join(f"<{a.name}>" if a.required else f"[{a.name}]" for a in p.arguments)
        lines.append(
            f"/mcp:{safe(p.server_id)}:{safe(p.name)} {safe(params)}  {safe(cut(p.description, 80))}"
        )
    chat.printer.block(
        [*lines, "Attach a resource with @<server>:<uri> in a message (/mcp resources <server>)."]
    )


async def prompt_command(chat: ChatSession, line: str) -> bool:
    """Runs ``/mcp:<server>:<prompt> ...``; ``False`` when ``line`` is not such a command."""
    head, _, rest = line.strip().partition(" ")
    match = PROMPT_COMMAND.match(head)
    if match is None:
        return False
    server_id, name = match.groups()
    runtime = await chat.ready()
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        chat.printer.line(f"error: {safe(str(exc))}")
        return True
    prompt = next(
        (p for p in await runtime.mcp_prompts() if p.server_id == server_id and p.name == name), None
    )
    if prompt is None:
        chat.printer.line(f"error: MCP server {safe(server_id)!r} has no prompt {safe(name)!r} (see /mcp)")
        return True
    arguments: dict[str, str] = {}
    positional = [a.name for a in prompt.arguments]
    for word in words:
        key, sep, value = word.partition("=")
        if sep and key in positional:
            arguments[key] = value
        else:
            free = [a for a in positional if a not in arguments]
            if not free:
                chat.printer.line(f"error: too many values for /mcp:{server_id}:{name}")
                return True
            arguments[free[0]] = word
    missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
    if missing:
        chat.printer.line(f"error: /mcp:{server_id}:{name} needs {', '.join(missing)}")
        return True
    messages = await runtime.get_mcp_prompt(server_id, name, arguments)
    text = "\n\n".join(m.text if m.role == "user" else f"[{m.role}]\n{m.text}" for m in messages)
    if not text.strip():
        chat.printer.line(f"error: prompt {safe(name)!r} of {safe(server_id)} is empty")
        return True
    chat.note(f"prompt {server_id}:{name}: {len(text)} characters sent as your message")
    await chat.turn(text)
    return True


async def with_attachments(chat: ChatSession, text: str) -> str | UserMessage | None:
    """``text`` with the resources it mentions attached (see the module docstring); ``None`` after an
    error line (nothing is sent)."""
    from agent_core.errors import AgentCoreError
    from agent_core.types.content import TextBlock
    from agent_core.types.runtime import UserMessage

    mentions = list(dict.fromkeys(MENTION.findall(text)))
    if not mentions:
        return text
    runtime = await chat.ready()
    if not (runtime.home_dir / "mcp.json").exists():
        return text
    blocks: list[Any] = [TextBlock(text=text)]
    for server_id, uri in mentions:
        try:
            contents = await runtime.read_mcp_resource(server_id, uri)
        except AgentCoreError as exc:
            if exc.details.get("server_id") == server_id and "unknown MCP server" in exc.message:
                continue  # not a configured server: plain text
            chat.printer.line(f"error: cannot attach @{safe(server_id)}:{safe(uri)}: {safe(exc.message)}")
            return None
        body = "\n".join(getattr(b, "text", "") for b in contents)
        attrs = f'server="{html.escape(server_id)}" uri="{html.escape(uri)}"'
        blocks.append(TextBlock(text=f"<resource {attrs}>\n{body}\n</resource>"))
        chat.note(f"attached @{server_id}:{uri} ({len(body)} characters)")
    return UserMessage(content=blocks) if len(blocks) > 1 else text


async def ask_elicitation(chat: ChatSession, request: PermissionRequest) -> PermissionDecision:
    """The elicitation form (see the module docstring)."""
    from agent_core._mcp.forms import convert, form_fields, kind_of
    from agent_core.types.permissions import PermissionDecision

    meta = request.metadata
    server = safe(str(meta.get("server_id", "?")))
    chat.printer.end_reply()
    out = chat.prompt_out
    out.write(f"MCP server {server} asks: {safe(str(meta.get('message', '')))}\n")
    assert chat.input is not None

    async def read(label: str) -> str | None:
        assert chat.input is not None
        line = await chat.input.read(label, history=False)
        return None if line is None else line.strip()

    if meta.get("url"):
        out.write(f"  open: {safe(str(meta['url']))}\n")
        answer = await read("  done there? [y/N] ")
        chat.permission_asked = True
        if answer is not None and answer.lower() in ("y", "yes"):
            return PermissionDecision(decision="allow_once")
        return PermissionDecision(decision="deny", reason="not completed")
    content: dict[str, Any] = {}
    for name, spec, required in form_fields(meta.get("requested_schema") or {}):
        hint = spec.get("description") or ""
        label = f"  {safe(name)} ({kind_of(spec)}{', required' if required else ''}){' ' + safe(hint) if hint else ''}: "
        for _ in range(3):
            value = await read(label)
            if value is None or value == "!cancel":
                chat.permission_asked = True
                return PermissionDecision(
                    decision="deny", reason="cancelled", metadata={"elicitation": "cancel"}
                )
            if value == "!decline":
                chat.permission_asked = True
                return PermissionDecision(decision="deny", reason="declined")
            if not value and not required:
                break
            try:
                content[name] = convert(value, spec)
                break
            except ValueError as exc:
                out.write(f"  expected {exc}\n")
        else:
            chat.permission_asked = True
            return PermissionDecision(decision="deny", reason=f"no valid value for {name}")
    chat.permission_asked = True
    out.write("  -> sent\n")
    return PermissionDecision(decision="allow_once", metadata={"content": content})
