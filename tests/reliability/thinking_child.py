"""Child process of ``test_thinking_crash_resume``: one run on the configured model (SIGKILLed mid-run).

Usage: ``python -m tests.reliability.thinking_child <project> <message>``; prints the session id, then
waits for the run.
"""

from __future__ import annotations

import asyncio
import sys

from agent_core import AgentRuntime


async def main(project: str, message: str) -> None:
    async with AgentRuntime(project_dir=project) as runtime:
        run = await runtime.start(message)
        print(run.session_id, flush=True)
        await run.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
