"""An MCP client that offers sampling (the Python `mcp` SDK 2.x), answering
devboy's `sampling/createMessage` requests like an oracle model.

Run by `tests/find_files.rs` with the test peers' virtualenv interpreter:

    python sampling_client.py --devboy BIN --config FILE --root DIR --query Q --gold PATH... [--no-sampling]

devboy's config sets `[retrieval.llm] provider = "mcp-sampling"`, so
`devboy_find_files` ranks with this client's "model": the callback reads
the candidates out of the prompt as a model would (Beam's list, or Block's
current block with its `Path prefix`) and answers with the JSON object the
prompt asks for, picking what is, or holds, a gold file. With
`--no-sampling` the client offers no sampling, and devboy must answer
offline. Prints a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
import mcp.types as types


def entries(text: str, prefix: str) -> list[tuple[str, str, bool]]:
    """(id, full path, is file) of every `- id:` entry in `text`."""
    out = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("- id: ") and i + 2 < len(lines):
            path = lines[i + 1].strip().removeprefix("path: ")
            kind = lines[i + 2].strip().removeprefix("type: ")
            out.append((line[len("- id: "):].strip(), prefix + path, kind == "file"))
    return out


def candidates(text: str) -> list[tuple[str, str, bool]]:
    if "Selectable ids in the CURRENT BLOCK" in text:
        blocks = text[: text.rfind("\nQuery: ")]
        current = blocks[blocks.rfind("--- BLOCK "):]
        prefix = ""
        for line in current.splitlines():
            if line.startswith("Path prefix: "):
                prefix = line[len("Path prefix: "):]
        return entries(current, prefix)
    listing = text.split("Current candidates", 1)[-1].split("RULES:", 1)[0]
    return entries(listing, "")


def pick(offered: list[tuple[str, str, bool]], gold: list[str]) -> dict:
    files = [i for i, p, f in offered if f and p in gold]
    dirs = sorted(
        ((i, sum(g.startswith(p + "/") for g in gold)) for i, p, f in offered if not f),
        key=lambda d: -d[1],
    )
    dirs = [i for i, n in dirs if n > 0]
    return {"ranked_ids": files + dirs, "done": not dirs and bool(files)}


async def run(args: argparse.Namespace) -> dict:
    seen: list[dict] = []

    async def sampling(context, params: types.CreateMessageRequestParams):
        text = "".join(
            block.text
            for message in params.messages
            for block in (message.content if isinstance(message.content, list) else [message.content])
            if getattr(block, "type", None) == "text"
        )
        answer = pick(candidates(text), args.gold)
        seen.append({"system": bool(params.system_prompt), "ids": answer["ranked_ids"]})
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=json.dumps(answer)),
            model="sdk-oracle",
            stop_reason="endTurn",
        )

    params = StdioServerParameters(
        command=args.devboy,
        args=["mcp", "--config", args.config],
        env=dict(os.environ),
    )
    callback = None if args.no_sampling else sampling
    async with Client(params, sampling_callback=callback, read_timeout_seconds=60) as client:
        result = await client.call_tool(
            "devboy_find_files", {"query": args.query, "root": args.root, "k": len(args.gold)}
        )
        text = "".join(getattr(c, "text", "") for c in result.content)
    return {"text": text, "is_error": bool(result.is_error), "sampling_requests": seen}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--devboy", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--gold", nargs="+", required=True)
    parser.add_argument("--no-sampling", action="store_true")
    args = parser.parse_args()
    summary = anyio.run(run, args)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
