"""A client without tool search (the Python `mcp` SDK 2.x) in a lazy devboy session.

Run by `tests/lazy_tools.rs` with the test peers' virtualenv interpreter:

    python lazy_client.py --devboy BIN --config FILE --file PATH --repo DIR

devboy wraps the five reference servers (prefixes fs, memory, git, time,
everything) with `[tools] lazy` in effect for this client, so the first
`tools/list` offers only devboy's built-ins. The script works the way a
model would: it searches with `devboy_find_tools`, calls what it found,
calls other tools by their full names without searching, and checks that
every call succeeds, that each found or used tool joins the list with a
`tools/list_changed`, and that an unknown name is refused cleanly. It
prints a JSON summary on stdout (every listing it received, in order) and
exits 1 if any check failed. Checks are explicit, never bare `assert`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import ToolListChangedNotification

from checks import Checks, finish

STEP_TIMEOUT_S = 30
# How long a found tool may take to be announced by `list_changed`.
NOTIFY_TIMEOUT_S = 10


def texts(result: Any) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


class Notices:
    """Counts `tools/list_changed` and lets the script wait for the next one."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def handler(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification) or (
            getattr(message, "method", None) == "notifications/tools/list_changed"
        ):
            self.count += 1
            self.event.set()
        await anyio.lowlevel.checkpoint()

    async def wait_after(self, seen: int) -> bool:
        with anyio.move_on_after(NOTIFY_TIMEOUT_S):
            while self.count <= seen:
                self.event = anyio.Event()
                if self.count > seen:
                    break
                await self.event.wait()
        return self.count > seen


async def run(args: argparse.Namespace, checks: Checks, summary: dict[str, Any]) -> None:
    params = StdioServerParameters(
        command=args.devboy,
        args=["mcp", "--config", args.config, "--list-grace-ms", "60000"],
        env=dict(os.environ),
    )
    notices = Notices()
    listings: list[list[dict[str, Any]]] = []
    summary["listings"] = listings
    calls: list[dict[str, Any]] = []
    summary["calls"] = calls

    async with Client(
        params, read_timeout_seconds=STEP_TIMEOUT_S, message_handler=notices.handler
    ) as client:

        async def listing() -> list[str]:
            tools = (await client.list_tools()).tools
            listings.append(
                [
                    {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                    for t in tools
                ]
            )
            return [t.name for t in tools]

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            result = await client.call_tool(name, arguments)
            text = texts(result)
            calls.append({"tool": name, "is_error": bool(result.is_error), "text": text[:4000]})
            checks.check(not result.is_error, f"{name} succeeds", text[:300])
            return result

        async def joins(name: str, seen: int) -> None:
            notified = await notices.wait_after(seen)
            checks.check(notified, f"list_changed after {name} was found or used")
            names = await listing()
            checks.check(name in names, f"{name} joins the list", names)

        first = await listing()
        summary["first_listing"] = first
        checks.check(
            all(n.startswith("devboy_") for n in first), "the first listing is devboy's own", first
        )
        checks.check("devboy_find_tools" in first, "devboy_find_tools listed", first)

        # -- found, then called
        seen = notices.count
        found = await call("devboy_find_tools", {"query": "read the contents of a text file"})
        checks.check("fs__read_text_file" in texts(found), "a file reader found", texts(found))
        await joins("fs__read_text_file", seen)
        read = await call("fs__read_text_file", {"path": args.file})
        with open(args.file, encoding="utf-8") as f:
            checks.check(texts(read) == f.read(), "the file read whole")

        seen = notices.count
        found = await call("devboy_find_tools", {"query": "create entities knowledge graph", "limit": 3})
        checks.check("memory__create_entities" in texts(found), "the graph writer found", texts(found))
        await joins("memory__create_entities", seen)
        await call(
            "memory__create_entities",
            {"entities": [{"name": "devboy", "entityType": "project", "observations": ["lazy"]}]},
        )

        # -- called by full name without a search: works, and joins the list
        seen = notices.count
        status = await call("git__git_status", {"repo_path": args.repo})
        checks.check("branch" in texts(status).lower(), "git status read", texts(status))
        await joins("git__git_status", seen)
        await call("time__get_current_time", {"timezone": "UTC"})
        graph = await call("memory__read_graph", {})
        checks.check("devboy" in texts(graph), "the graph holds what was written", texts(graph))
        found = await call("devboy_find_tools", {"query": "echo a message back"})
        checks.check("everything__echo" in texts(found), "echo found", texts(found))
        echo = await call("everything__echo", {"message": "lazy but complete"})
        checks.check("lazy but complete" in texts(echo), "echo answered", texts(echo))

        # -- a search that finds nothing names the tools; an unknown name is refused
        nothing = await call("devboy_find_tools", {"query": "zzyzx quux"})
        checks.check("fs__list_directory" in texts(nothing), "no match names every tool", texts(nothing))
        try:
            await client.call_tool("fs__no_such_tool", {})
            checks.check(False, "an unknown tool is refused")
        except MCPError as error:
            checks.check("no_such_tool" in error.message, "the refusal names the tool", error.message)

        final = await listing()
        summary["final_listing"] = final
        summary["list_changed"] = notices.count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devboy", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--file", required=True, help="a text file inside the filesystem root")
    parser.add_argument("--repo", required=True, help="the git repository the git server serves")
    args = parser.parse_args()
    return finish(run, args, {})

if __name__ == "__main__":
    sys.exit(main())
