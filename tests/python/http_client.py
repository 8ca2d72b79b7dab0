"""Two Streamable HTTP clients (the Python `mcp` SDK 2.x) on one `devboy serve --http`.

Run by `tests/http_serve.rs` with the test peers' virtualenv interpreter:

    python http_client.py --url URL --token TOKEN --file PATH

devboy proxies the devboy test server (`t`) and server-filesystem (`fs`,
allowed to read PATH's directory). The script checks what the HTTP door
refuses (no token, a wrong token, a foreign Origin, another path) and the
loopback Origins it accepts, then
opens two MCP sessions at once: each lists and calls tools; a repeated read
is a reference in the session that read it and a full result in the other;
an id printed in one session is unknown in the other. It prints a JSON
summary on stdout and exits 1 if any check failed (explicit checks, never
bare `assert`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from checks import Checks, finish

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def texts(result: Any) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


def result_id(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("> [id: ") and line.endswith("]"):
            return line[len("> [id: ") : -1]
    return None


async def refusals(args: argparse.Namespace, checks: Checks, summary: dict[str, Any]) -> None:
    bearer = {"Authorization": f"Bearer {args.token}"}
    base = args.url.rsplit("/mcp", 1)[0]
    async with httpx2.AsyncClient(timeout=10) as http:
        cases = [
            ("no token", args.url, ACCEPT, 401),
            ("a wrong token", args.url, {**ACCEPT, "Authorization": "Bearer not-the-token-at-all"}, 401),
            ("a foreign Origin", args.url, {**ACCEPT, **bearer, "Origin": "http://evil.example"}, 403),
            ("another path", base + "/other", {**ACCEPT, **bearer}, 404),
        ]
        for what, url, headers, status in cases:
            response = await http.post(url, headers=headers, json=INIT)
            summary.setdefault("refused", {})[what] = [response.status_code, response.text[:120]]
            checks.check(response.status_code == status, f"{what} is refused with {status}", response.status_code)
            checks.check(args.token not in response.text, f"{what}: the token is not echoed")
        # A page on this machine may call a loopback devboy, on any port and
        # by any of loopback's names (the MCP spec's DNS-rebinding rule).
        port = args.url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
        for origin in (f"http://localhost:{port}", "http://127.0.0.1:5173", "https://[::1]:8443"):
            response = await http.post(args.url, headers={**ACCEPT, **bearer, "Origin": origin}, json=INIT)
            summary.setdefault("accepted origins", {})[origin] = response.status_code
            checks.check(response.status_code == 200, f"Origin {origin} is accepted", response.status_code)
            # The session that initialize opened ends here, not by idling out.
            session = response.headers.get("mcp-session-id")
            if session:
                await http.delete(args.url, headers={**bearer, "Origin": origin, "mcp-session-id": session})
        unauth = await http.post(args.url, headers=ACCEPT, json=INIT)
        checks.check(
            unauth.headers.get("www-authenticate", "").startswith("Bearer"),
            "401 asks for a bearer token",
            dict(unauth.headers),
        )


def client(args: argparse.Namespace) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.token}"})
    return Client(streamable_http_client(args.url, http_client=http), read_timeout_seconds=30)


async def run(args: argparse.Namespace, checks: Checks, summary: dict[str, Any]) -> None:
    await refusals(args, checks, summary)
    with open(args.file, encoding="utf-8") as f:
        file_text = f.read()
    async with client(args) as a, client(args) as b:
        for name, session in (("a", a), ("b", b)):
            names = [t.name for t in (await session.list_tools()).tools]
            summary[f"tools_{name}"] = names
            for tool in ("t__echo", "fs__read_text_file", "devboy_expand"):
                checks.check(tool in names, f"{tool} listed to {name}", names)
        echo = await a.call_tool("t__echo", {"text": "over http"})
        checks.check(texts(echo) == "over http", "echo over HTTP", texts(echo))

        first_a = texts(await a.call_tool("fs__read_text_file", {"path": args.file}))
        id_a = result_id(first_a)
        checks.check(id_a is not None and file_text.splitlines()[0] in first_a, "a reads the file in full", first_a[:200])
        again_a = texts(await a.call_tool("fs__read_text_file", {"path": args.file}))
        checks.check(again_a.startswith(f"> [ref: {id_a}"), "a's repeat is a reference to a's id", again_a[:200])

        first_b = texts(await b.call_tool("fs__read_text_file", {"path": args.file}))
        id_b = result_id(first_b)
        checks.check(
            id_b is not None and file_text.splitlines()[0] in first_b,
            "b, which never read it, gets it in full",
            first_b[:200],
        )
        checks.check(id_a != id_b, "the sessions print different ids", [id_a, id_b])
        foreign = await b.call_tool("devboy_expand", {"id": id_a})
        checks.check(
            foreign.is_error or file_text.splitlines()[0] not in texts(foreign),
            "a's id is unknown in b",
            texts(foreign)[:200],
        )
        own = await a.call_tool("devboy_expand", {"id": id_a})
        checks.check(file_text.splitlines()[0] in texts(own), "a's id expands in a", texts(own)[:200])
        summary["ids"] = [id_a, id_b]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--file", required=True)
    args = parser.parse_args()
    return finish(run, args, {})

if __name__ == "__main__":
    sys.exit(main())
