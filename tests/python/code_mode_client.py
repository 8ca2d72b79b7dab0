"""Code mode over Streamable HTTP (the Python `mcp` SDK 2.x) on `devboy serve --http`.

Run by `tests/http_serve.rs` with the test peers' virtualenv interpreter:

    python code_mode_client.py --url URL --token TOKEN --file PATH

devboy proxies the devboy test server (`t`, whose `echo` is allowed to
scripts by `[code] allow`) and server-filesystem (`fs`, allowed to read
PATH's directory), with `[code] timeout_secs = 2`. Two sessions: in one a
script reads PATH and joins it with an echo, a write of the test server is
refused; while a script spins in one session, the other is answered at
once, and the spinning script ends as an error naming its limit. It prints
a JSON summary on stdout and exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from checks import Checks, finish


def texts(result: Any) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


def client(args: argparse.Namespace) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.token}"})
    return Client(streamable_http_client(args.url, http_client=http), read_timeout_seconds=30)


async def run(args: argparse.Namespace, checks: Checks, summary: dict[str, Any]) -> None:
    async with client(args) as a, client(args) as b:
        names = [t.name for t in (await a.list_tools()).tools]
        checks.check("devboy_run" in names, "devboy_run is listed", names)
        code = (
            f"const text = (await tools.fs.read_text_file({{path: {json.dumps(args.file)}}})).content;\n"
            "const lines = text.split('\\n').filter(l => l.includes('6402')).length;\n"
            "const said = await tools.t.echo({text: 'counted ' + lines});\n"
            "let crash;\n"
            "try { await tools.t.crash({}); crash = 'ran'; } catch (e) { crash = e.message.split(';')[0]; }\n"
            "return {said, crash};"
        )
        ran = await a.call_tool("devboy_run", {"code": code})
        summary["ran"] = texts(ran)
        checks.check(not ran.is_error, "the script ran", texts(ran))
        checks.equal(
            json.loads(texts(ran)) if not ran.is_error else None,
            {"said": "counted 60", "crash": "t__crash may write (its class is unknown)"},
            "the answer: the file counted, the echo joined, the write refused",
        )
        pid_before = texts(await b.call_tool("t__pid", {}))

        spun: dict[str, Any] = {}

        async def spin() -> None:
            spun["result"] = await a.call_tool("devboy_run", {"code": "while (true) {}"})

        async with anyio.create_task_group() as group:
            group.start_soon(spin)
            await anyio.sleep(0.3)
            started = time.monotonic()
            await b.send_ping()
            echo = await b.call_tool("t__echo", {"text": "meanwhile"})
            waited = time.monotonic() - started
            summary["answered_while_spinning_s"] = round(waited, 3)
            checks.equal(texts(echo), "meanwhile", "the other session is answered while a script spins")
            checks.check(waited < 1.5, "and at once", waited)
        result = spun["result"]
        summary["spun"] = texts(result)
        checks.check(result.is_error is True, "the spinning script is an error result", texts(result))
        checks.check("past its 2 s limit" in texts(result), "naming its limit", texts(result))
        checks.equal(texts(await b.call_tool("t__pid", {})), pid_before, "the test server never restarted")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--file", required=True)
    args = parser.parse_args()
    return finish(run, args, {})


if __name__ == "__main__":
    sys.exit(main())
