#!/usr/bin/env python3
"""The resident set of `devboy mcp` serving two real upstreams, idle and
after many distinct results.

    tests/peers/install.sh                       # the filesystem and git servers
    cargo build --release
    python3 scripts/idle_rss.py [target/release/devboy] [--results N]

Starts devboy in a scratch directory with the filesystem server (npm) and
the git server (PyPI) behind it, initializes, lists the tools once the
upstreams are up, waits two seconds and prints devboy's VmRSS and VmHWM
(its peak) from /proc, three runs. With `--results N` (one run), it then
reads N distinct 64 KB text files through devboy, one call at a time, and
prints the same again. Issue 41's targets: idle RSS at most 40 MiB with two
upstreams, at most 80 MiB after 3,000 distinct 64 KB results.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "tests" / "peers"


def text_file(path: Path, seed: int) -> None:
    """About 64 KB of lines no other file has (log-like, so devboy's
    pipeline treats it as ordinary text)."""
    lines = []
    size = 0
    i = 0
    while size < 64 * 1024:
        line = f"{seed:05d}.{i:05d} worker-{(seed * 31 + i) % 97} handled request {seed * 100_003 + i * 7919} in {(i * 37) % 1000} ms"
        lines.append(line)
        size += len(line) + 1
        i += 1
    path.write_text("\n".join(lines) + "\n")


def rss(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {line.split(":")[0]: int(line.split()[1]) for line in status
            if line.startswith(("VmRSS", "VmHWM"))}


def one_run(devboy: str, results: int = 0) -> dict:
    with tempfile.TemporaryDirectory(prefix="devboy-idle-") as tmp:
        home = Path(tmp)
        repo = home / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        config = home / "devboy.toml"
        config.write_text(
            "[servers.fs]\n"
            f"command = {json.dumps(str(PEERS / 'node_modules/.bin/mcp-server-filesystem'))}\n"
            f"args = [{json.dumps(str(home))}]\n\n"
            "[servers.git]\n"
            f"command = {json.dumps(str(PEERS / '.venv/bin/mcp-server-git'))}\n"
            f"args = [\"--repository\", {json.dumps(str(repo))}]\n"
        )
        env = dict(os.environ)
        for var, sub in [("CONFIG", "cfg"), ("CACHE", "cache"), ("RUNTIME", "run"), ("TELEMETRY", "tel")]:
            env[f"DEVBOY_{var}_DIR"] = str(home / sub)
        proc = subprocess.Popen(
            [devboy, "mcp", "--config", str(config), "--list-grace-ms", "30000"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

        def send(message: dict) -> None:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()

        def answer(wanted: int) -> dict:
            while True:
                message = json.loads(proc.stdout.readline())
                if message.get("id") == wanted:
                    return message

        try:
            send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "idle-rss", "version": "0"}}})
            answer(1)
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            tools = []
            while not any(t["name"].startswith("git") for t in tools):
                time.sleep(0.5)
                send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                tools = answer(2)["result"]["tools"]
            time.sleep(2)
            kib = rss(proc.pid)
            kib["tools"] = len(tools)
            if results:
                read = next(t["name"] for t in tools if t["name"].endswith("read_text_file"))
                files = home / "files"
                files.mkdir()
                for n in range(results):
                    path = files / f"f{n}.log"
                    text_file(path, n)
                    send({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                          "params": {"name": read, "arguments": {"path": str(path)}}})
                    reply = answer(10 + n)
                    if "error" in reply or reply["result"].get("isError"):
                        raise SystemExit(f"the read of {path} failed: {reply}")
                    path.unlink()
                time.sleep(2)
                kib["after"] = rss(proc.pid)
            return kib
        finally:
            proc.kill()
            proc.wait()


def main() -> int:
    args = sys.argv[1:]
    results = 0
    if "--results" in args:
        at = args.index("--results")
        results = int(args[at + 1])
        del args[at:at + 2]
    devboy = args[0] if args else str(ROOT / "target/release/devboy")
    for run in range(1, 2 if results else 4):
        kib = one_run(devboy, results)
        print(f"run {run}: {kib['tools']} tools listed; idle VmRSS {kib['VmRSS'] / 1024:.1f} MiB, "
              f"peak VmHWM {kib['VmHWM'] / 1024:.1f} MiB")
        if results:
            after = kib["after"]
            print(f"  after {results} distinct 64 KB results: VmRSS {after['VmRSS'] / 1024:.1f} MiB, "
                  f"peak VmHWM {after['VmHWM'] / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
