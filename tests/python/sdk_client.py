"""An independent MCP client (the Python `mcp` SDK 2.x) driving devboy over stdio.

Run by `tests/python_sdk.rs` with the test peers' virtualenv interpreter:

    python sdk_client.py --devboy BIN --config FILE --file PATH [--mode auto|legacy] [--list-grace-ms N]

devboy is configured (by the Rust test) with two upstreams: the devboy test
server as prefix `t` and `@modelcontextprotocol/server-filesystem` as prefix
`fs`, allowed to read PATH's directory.

The script connects the way an SDK user would (`mcp.Client` over
`StdioServerParameters`; by default in the SDK's default connect mode
"auto", which probes `server/discover` and falls back to `initialize`),
exercises tools, structured
results, progress, resources, prompts and `devboy_status`, prints a JSON
summary on stdout and exits 1 if any check failed. Checks are explicit (never
bare `assert`, which `python -O` strips). Diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from checks import Checks, finish

# Every request must be answered well within this (the Rust side has its own limit too).
STEP_TIMEOUT_S = 20


def texts(result: Any) -> list[str]:
    """The text blocks of a tool result."""
    return [block.text for block in result.content if getattr(block, "type", None) == "text"]


async def run(args: argparse.Namespace, checks: Checks, summary: dict[str, Any]) -> None:
    params = StdioServerParameters(
        command=args.devboy,
        args=["mcp", "--config", args.config]
        + ([] if args.list_grace_ms is None else ["--list-grace-ms", str(args.list_grace_ms)]),
        # The SDK passes only a few safe variables unless told otherwise.
        env=dict(os.environ),
    )
    async with Client(params, mode=args.mode, read_timeout_seconds=STEP_TIMEOUT_S) as client:
        # -- initialize (the SDK probes server/discover first, then falls back)
        info = client.server_info
        summary["protocol_version"] = client.protocol_version
        summary["server_name"] = info.name if info else None
        checks.equal(summary["server_name"], "devboy", "server name")
        capabilities = client.server_capabilities
        checks.check(capabilities.tools is not None, "tools capability")
        checks.check(capabilities.resources is not None, "resources capability")
        checks.check(capabilities.prompts is not None, "prompts capability")

        # -- tools/list
        listing = await client.list_tools()
        names = [tool.name for tool in listing.tools]
        summary["tools"] = names
        checks.check("devboy_status" in names, "devboy_status listed", names)
        for name in ["t__echo", "t__structured", "t__sleep", "fs__read_text_file"]:
            checks.check(name in names, f"{name} listed", names)
        unprefixed = [n for n in names if not n.startswith("devboy_") and "__" not in n]
        checks.equal(unprefixed, [], "every upstream tool carries a prefix")
        by_name = {tool.name: tool for tool in listing.tools}
        structured_tool = by_name.get("t__structured")
        checks.check(
            structured_tool is not None and structured_tool.output_schema is not None,
            "t__structured keeps its outputSchema",
        )

        # -- tools/call: echo
        echo = await client.call_tool("t__echo", {"text": "hello from the python sdk"})
        summary["echo"] = texts(echo)
        checks.equal(texts(echo), ["hello from the python sdk"], "echo text")
        checks.equal(echo.is_error, False, "echo is not an error")

        # -- tools/call: structured content (the SDK validates it against the outputSchema)
        structured = await client.call_tool("t__structured", {"n": 4})
        content = structured.structured_content
        summary["structured"] = content
        items = content.get("items") if isinstance(content, dict) else None
        checks.check(isinstance(items, list) and len(items) == 4, "structured items", content)
        if isinstance(items, list) and len(items) == 4:
            checks.equal(items[3], {"id": 3, "name": "a3"}, "structured item 3")
        # devboy may re-encode the text block for clients that show text (a
        # table instead of JSON); `devboy decode` must give back exactly the
        # structuredContent.
        text = texts(structured)
        decoded = None
        if len(text) == 1:
            run = subprocess.run(
                [args.devboy, "decode"], input=text[0], capture_output=True, text=True, check=False
            )
            decoded = json.loads(run.stdout) if run.returncode == 0 else run.stderr
        checks.check(decoded == content, "structured text decodes to structuredContent", [text, decoded])

        # -- tools/call: a real server's structured result
        with open(args.file, encoding="utf-8") as f:
            file_text = f.read()
        read = await client.call_tool("fs__read_text_file", {"path": args.file})
        summary["fs_structured"] = read.structured_content
        checks.equal(texts(read), [file_text], "fs read_text_file text")
        checks.equal(read.structured_content, {"content": file_text}, "fs read_text_file structuredContent")

        # -- tools/call: an error result passes through as an error result
        failed = await client.call_tool("t__fail", {})
        checks.equal(failed.is_error, True, "t__fail is an error result")
        # -- tools/call: an unknown tool is a JSON-RPC error
        try:
            await client.call_tool("t__no_such_tool", {})
            checks.check(False, "unknown tool raises MCPError")
        except MCPError as error:
            summary["unknown_tool_error"] = {"code": error.code, "message": error.message}
            checks.check("no_such_tool" in error.message, "unknown tool error names the tool", error.message)

        # -- progress
        progress: list[dict[str, Any]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append({"progress": value, "total": total, "message": message})

        slept = await client.call_tool(
            "t__sleep",
            {"ms": 600, "progress_steps": 3},
            progress_callback=on_progress,
        )
        summary["progress"] = progress
        checks.equal(slept.is_error, False, "sleep result")
        checks.equal(
            [(p["progress"], p["total"]) for p in progress],
            [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)],
            "three progress events in order",
        )

        # -- resources
        resources = await client.list_resources()
        listed = {r.uri: r.name for r in resources.resources}
        summary["resources"] = listed
        checks.equal(listed.get("test://greeting"), "t__greeting", "greeting resource listed with prefixed name")
        templates = await client.list_resource_templates()
        summary["resource_templates"] = {t.uri_template: t.name for t in templates.resource_templates}
        checks.equal(
            summary["resource_templates"].get("test://echo/{text}"),
            "t__echo",
            "echo template listed with prefixed name",
        )
        greeting = await client.read_resource("test://greeting")
        greeting_texts = [getattr(c, "text", None) for c in greeting.contents]
        summary["resource_text"] = greeting_texts
        checks.equal(greeting_texts, ["hello"], "read test://greeting")
        checks.equal(str(greeting.contents[0].uri), "test://greeting", "resource uri kept")
        echoed = await client.read_resource("test://echo/sdk-42")
        summary["template_text"] = [getattr(c, "text", None) for c in echoed.contents]
        checks.equal(summary["template_text"], ["sdk-42"], "read through the template")
        try:
            await client.read_resource("nowhere://nothing")
            checks.check(False, "unknown resource raises MCPError")
        except MCPError as error:
            checks.check(True, "unknown resource raises MCPError")
            summary["unknown_resource_error"] = {"code": error.code, "message": error.message}

        # -- prompts
        prompts = await client.list_prompts()
        prompt_names = [p.name for p in prompts.prompts]
        summary["prompts"] = prompt_names
        checks.check("t__greet" in prompt_names, "t__greet listed", prompt_names)
        greet = next((p for p in prompts.prompts if p.name == "t__greet"), None)
        if greet is not None:
            checks.equal(
                [(a.name, a.required) for a in greet.arguments or []],
                [("name", True)],
                "prompt arguments kept",
            )
        got = await client.get_prompt("t__greet", {"name": "Ada"})
        prompt_texts = [getattr(m.content, "text", None) for m in got.messages]
        summary["prompt_text"] = prompt_texts
        summary["prompt_roles"] = [m.role for m in got.messages]
        checks.equal(prompt_texts, ["Hello, Ada!"], "prompts/get text")
        checks.equal(summary["prompt_roles"], ["user"], "prompts/get role")
        checks.equal(got.description, "A greeting", "prompts/get description")

        # -- devboy_status
        status_result = await client.call_tool("devboy_status", {})
        status_text = texts(status_result)
        status = json.loads(status_text[0]) if status_text else {}
        upstreams = {u["name"]: u for u in status.get("upstreams", [])}
        summary["status"] = {
            name: {k: u.get(k) for k in ("prefix", "state", "tools", "calls", "errors")}
            for name, u in upstreams.items()
        }
        for name, prefix in [("t", "t"), ("fs", "fs")]:
            entry = upstreams.get(name, {})
            checks.equal(entry.get("state"), "ready", f"status: {name} ready")
            checks.equal(entry.get("prefix"), prefix, f"status: {name} prefix")
            checks.check((entry.get("tools") or 0) > 0, f"status: {name} has tools", entry)
        # echo, structured, fail, sleep reached `t` (the unknown tool never did).
        checks.equal(upstreams.get("t", {}).get("calls"), 4, "status: calls to t")
        checks.equal(upstreams.get("fs", {}).get("calls"), 1, "status: calls to fs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devboy", required=True, help="the devboy binary")
    parser.add_argument("--config", required=True, help="devboy config file")
    parser.add_argument("--file", required=True, help="a text file inside the filesystem root")
    parser.add_argument(
        "--list-grace-ms", type=int, default=None, help="devboy's --list-grace-ms (how long a first listing waits)"
    )
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"], help="the SDK's connect mode")
    args = parser.parse_args()

    return finish(run, args, {"mode": args.mode})

if __name__ == "__main__":
    sys.exit(main())
