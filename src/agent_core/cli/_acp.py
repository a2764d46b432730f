"""``soong-agent acp [--path <project>]``: soong-agent as an ACP agent on stdin/stdout (issue 38 item 1).

stdout carries only the protocol (newline-delimited JSON-RPC); warnings and errors go to stderr. The
command serves until the client closes stdin (exit 0). Needs the ``acp`` extra: without it, one line and
exit 1. With ``--path`` the project's runtime opens before the protocol starts (a configuration error is
one line and exit 1); without it each session's project is the ``cwd`` the editor sends. Ctrl-C (or
SIGTERM) stops serving: running prompts are cancelled, the runtimes close, exit 130 (0 after SIGTERM).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli import _interrupts as interrupts
from agent_core.cli._terminal import Output, error_text

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
MISSING_EXTRA = (
    "soong-agent: error: `soong-agent acp` needs the Agent Client Protocol SDK: "
    "pip install 'soong-agent[acp]'\n"
)


async def acp_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Serves ACP on stdio until the client disconnects; returns the exit status."""
    try:
        from agent_core.adapters.acp import SoongAcpAgent, serve_acp
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "acp":
            raise
        err.write(MISSING_EXTRA)
        return EXIT_FAILED
    from agent_core.errors import AgentCoreError

    agent = SoongAcpAgent(project_dir=args.path, mode="orchestrator" if args.orchestrator else "normal")
    if args.path is not None:
        try:
            await agent.open_pinned()
        except AgentCoreError as exc:
            await agent.close()
            err.write(error_text(exc))
            return EXIT_FAILED
    if interrupts.pending():
        await agent.close()
        return EXIT_INTERRUPTED
    tasks = TaskOwner("acp server")
    stopped_by: list[str] = []
    try:
        await interrupts.serve_until_stopped(tasks.spawn(serve_acp(agent)), stopped_by)
    finally:
        await tasks.aclose()
        await agent.close()
    if "SIGINT" in stopped_by:
        return EXIT_INTERRUPTED
    return EXIT_OK
