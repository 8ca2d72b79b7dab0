"""A Streamable HTTP client (the Python `mcp` SDK 2.x) that leaves without `DELETE`.

Run by `tests/http_serve.rs` with the test peers' virtualenv interpreter:

    python http_leaving_client.py --url URL --token TOKEN (--leave | --stay)

`--leave` opens a session, lists tools, calls `t__echo` and exits without
ending its session, as a client that exits without `DELETE` (Claude Code)
does. `--stay` opens a session, lists tools, prints a `{"ready": true}` line
and waits: on a line on stdin it calls `t__echo` (its session must still be
there), prints `{"echoed": true}` (or false), and holds the session open
until stdin closes or it is killed. The summary is a JSON line on stdout;
the exit code is 1 if a check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from checks import Checks, finish


def texts(result: Any) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


async def echo(session: Client, checks: Checks, text: str) -> None:
    result = await session.call_tool("t__echo", {"text": text})
    checks.check(texts(result) == text, f"echo {text!r}", texts(result))


async def run(args: argparse.Namespace, checks: Checks, summary: dict[str, Any]) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.token}"})
    transport = streamable_http_client(args.url, http_client=http, terminate_on_close=False)
    async with http, Client(transport, read_timeout_seconds=30) as session:
        names = [t.name for t in (await session.list_tools()).tools]
        checks.check("t__echo" in names, "t__echo listed", names)
        if args.stay:
            print(json.dumps({"ready": True}), flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            await echo(session, checks, "still here")
            print(json.dumps({"echoed": not checks.failed}), flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)
        else:
            await echo(session, checks, "leaving")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--leave", action="store_true")
    mode.add_argument("--stay", action="store_true")
    args = parser.parse_args()
    return finish(run, args, {})


if __name__ == "__main__":
    sys.exit(main())
