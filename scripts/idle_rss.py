#!/usr/bin/env python3
"""The resident set of an idle `devboy mcp` serving two real upstreams.

    tests/peers/install.sh                       # the filesystem and git servers
    cargo build --release
    python3 scripts/idle_rss.py [target/release/devboy]

Starts devboy in a scratch directory with the filesystem server (npm) and
the git server (PyPI) behind it, initializes, lists the tools once the
upstreams are up, waits two seconds and prints devboy's VmRSS and VmHWM
(its peak) from /proc, three runs. Issue 41's target: idle RSS at most
40 MiB with two upstreams.
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


def one_run(devboy: str) -> dict:
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
            status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            kib = {line.split(":")[0]: int(line.split()[1]) for line in status
                   if line.startswith(("VmRSS", "VmHWM"))}
            kib["tools"] = len(tools)
            return kib
        finally:
            proc.kill()
            proc.wait()


def main() -> int:
    devboy = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/release/devboy")
    for run in range(1, 4):
        kib = one_run(devboy)
        print(f"run {run}: {kib['tools']} tools listed; idle VmRSS {kib['VmRSS'] / 1024:.1f} MiB, "
              f"peak VmHWM {kib['VmHWM'] / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
