#!/usr/bin/env python3
"""Scripted, deterministic MCP session against `devboy mcp` over stdio.

usage: driver.py OUTDIR FSROOT -- DEVBOY_CMD ARGS...

Sends initialize, notifications/initialized, tools/list, then a fixed list
of tools/call, strictly one at a time (each response awaited before the
next request is written).  Writes:

  OUTDIR/env/raw/responses.raw.jsonl   every line devboy wrote, as written
  OUTDIR/env/raw/transcript.jsonl      requests and responses, raw, in order
  OUTDIR/responses.jsonl               every JSON-RPC response, normalised
                                       (see normalise.py)
  OUTDIR/calls.txt                     one line per step: what it exercises

Stdlib only.  Environment (HOME, XDG_*, DEVBOY_TELEMETRY) is set by run.sh.
"""

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))

RESPONSE_TIMEOUT_S = 120


class Session:
    def __init__(self, cmd, raw_path, transcript_path, stderr_path):
        self.stderr = open(stderr_path, "wb")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            bufsize=0,
        )
        self.raw = open(raw_path, "w", encoding="utf-8")
        self.transcript = open(transcript_path, "w", encoding="utf-8")
        self.lines = queue.Queue()
        self.next_id = 1
        self.notifications = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.decode("utf-8"))
        self.lines.put(None)

    def _write(self, message):
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        self.transcript.write(json.dumps({"sent": message}, ensure_ascii=False) + "\n")
        self.proc.stdin.write(data.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def notify(self, method, params=None):
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + RESPONSE_TIMEOUT_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"driver: no response to {method} id={rid} in {RESPONSE_TIMEOUT_S}s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise SystemExit(f"driver: devboy closed stdout before answering {method} id={rid}")
            self.raw.write(line if line.endswith("\n") else line + "\n")
            self.raw.flush()
            message = json.loads(line)
            self.transcript.write(json.dumps({"received": message}, ensure_ascii=False) + "\n")
            if "method" in message and "id" in message:
                # A request from devboy to us (we declare no client
                # capabilities, so none is expected): refuse it, note it.
                self.notifications.append({"server_request": message["method"]})
                self._write({"jsonrpc": "2.0", "id": message["id"],
                             "error": {"code": -32601, "message": "not supported by driver"}})
                continue
            if "method" in message:
                # Notification (list_changed, log, progress...).  Their
                # timing is not part of the request/response contract;
                # kept in the raw transcript only.
                self.notifications.append({"notification": message["method"]})
                continue
            if message.get("id") != rid:
                raise SystemExit(f"driver: response id {message.get('id')} while waiting for {rid}")
            return line, message

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # Drain what is left (nothing should be).
        while True:
            try:
                line = self.lines.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.raw.write(line)
        self.raw.close()
        self.transcript.close()
        self.stderr.close()
        return self.proc.returncode


def text_of(message):
    result = message.get("result") or {}
    return "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


# Ids devboy prints: a session tag (1-8 lower-case letters) and a number,
# named in a hint next to devboy_expand.
EXPAND_ID = re.compile(r"devboy_expand(?:\s*\(?\s*(?:id\s*[=:]\s*)?[\"']?)\s*([a-z]{1,8}[0-9]+)")


def expand_ids(text):
    return EXPAND_ID.findall(text)


def wait_speculation_settled(status_cmd, log, timeout_s=15):
    """Out of band (the control socket, via `devboy status`), so the
    session's own call sequence stays fixed: wait until the prefetches a
    search sent have all landed (dispatched > 0, in_flight == 0).  On a
    timeout the session goes on (a binary that stopped prefetching then
    shows up in the diff, not as a hang)."""
    deadline = time.monotonic() + timeout_s
    polls = 0
    spec = None
    last = None
    while time.monotonic() < deadline:
        polls += 1
        out = subprocess.run(status_cmd, capture_output=True, text=True)
        try:
            doc = json.loads(out.stdout)
        except ValueError:
            doc = None
        spec = find_key(doc, "speculation")
        settled = (isinstance(spec, dict) and spec.get("in_flight", 1) == 0
                   and spec.get("dispatched", 0) > 0)
        # Settled on two polls in a row, with the same prefetch count.
        if settled and last == spec.get("dispatched"):
            log.write(f"speculation settled after {polls} polls: {json.dumps(spec)}\n")
            return True
        last = spec.get("dispatched") if settled else None
        time.sleep(0.1)
    log.write(f"speculation NOT settled after {polls} polls ({timeout_s}s): {json.dumps(spec)}\n")
    return False


def find_key(doc, key):
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for v in doc.values():
            found = find_key(v, key)
            if found is not None:
                return found
    elif isinstance(doc, list):
        for v in doc:
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    outdir, fsroot = argv[:sep]
    cmd = argv[sep + 1:]
    outdir = os.path.abspath(outdir)
    rawdir = os.path.join(outdir, "env", "raw")
    os.makedirs(rawdir, exist_ok=True)

    s = Session(cmd,
                os.path.join(rawdir, "stdout.raw.jsonl"),
                os.path.join(rawdir, "transcript.jsonl"),
                os.path.join(rawdir, "devboy.stderr"))
    status_cmd = [cmd[0], "status", "--format", "json", "--pid", str(s.proc.pid)]
    log = open(os.path.join(rawdir, "driver.log"), "w")
    responses = []  # raw response lines, one per step
    steps = []      # (method, params, label)
    ncalls = 0

    def req(method, params, label):
        line, message = s.request(method, params)
        responses.append(line)
        steps.append((method, params, label))
        return message

    def call(label, name, arguments):
        nonlocal ncalls
        ncalls += 1
        return req("tools/call", {"name": name, "arguments": arguments}, label)

    def first_id(message, what):
        ids = expand_ids(text_of(message))
        if not ids:
            # Keep going with an id that was never issued: the session keeps
            # its shape and the difference shows in the diff, step by step.
            log.write(f"{what}: NO devboy_expand id in the result; using 'missingid1'\n")
            print(f"driver: warning: no devboy_expand id in {what}", file=sys.stderr)
            return ["missingid1"]
        log.write(f"{what}: ids {ids}\n")
        return ids

    req("initialize", {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "replay-check-driver", "version": "1"},
    }, "initialize (no client capabilities)")
    s.notify("notifications/initialized")
    tools = req("tools/list", {}, "tools/list (after --list-grace-ms: every upstream listed)")
    names = [t["name"] for t in tools.get("result", {}).get("tools", [])]
    for needed in ("t__payload", "t__poll", "t__structured", "fs__read_text_file",
                   "fs__search_files", "devboy_expand", "devboy_compact", "devboy_status"):
        if needed not in names:
            raise SystemExit(f"driver: {needed} missing from tools/list: {names}")

    big = f"{fsroot}/big.txt"

    # --- dedup: repeated identical calls -------------------------------
    call("echo small (under min_body_bytes: untouched, no id)", "t__echo", {"text": "hello devboy"})
    call("echo small repeat (still untouched, no reference)", "t__echo", {"text": "hello devboy"})
    call("payload 3000 (fresh text, id line)", "t__payload", {"bytes": 3000})
    call("payload 3000 repeat (dedup reference)", "t__payload", {"bytes": 3000})
    call("payload 300 (under min_body_bytes)", "t__payload", {"bytes": 300})
    call("payload 20000 (large text)", "t__payload", {"bytes": 20000})
    call("payload 20000 repeat (reference)", "t__payload", {"bytes": 20000})
    # --- near references on a polled endpoint (near_ref = true) --------
    call("poll #1 (fresh, encoded)", "t__poll", {})
    poll2 = call("poll #2 (near reference: calls/state changed)", "t__poll", {})
    near_ids = first_id(poll2, "poll #2")
    call("expand the near reference's new id (last id in its hint)", "devboy_expand", {"id": near_ids[-1]})
    # --- structured: encoding and elision ------------------------------
    call("structured n=40 (structuredContent re-encoded losslessly)", "t__structured", {"n": 40})
    call("structured n=40 repeat (reference)", "t__structured", {"n": 40})
    el = call("structured n=400 (over budget_tokens: elided, hint with id)", "t__structured", {"n": 400})
    eid = first_id(el, "structured n=400")[0]
    call("expand elided id, items range from the hint's form", "devboy_expand", {"id": eid, "items": "10-20"})
    call("expand elided id, whole (bounded again)", "devboy_expand", {"id": eid})
    call("expand elided id, raw (the server's exact text)", "devboy_expand", {"id": eid, "raw": True})
    call("rich (several content blocks: text, image, resource_link, resource, _meta)", "t__rich", {})
    call("status mid-session (built-in; volatile fields normalised)", "devboy_status", {})
    # --- real upstream: server-filesystem ------------------------------
    call("fs list_allowed_directories", "fs__list_allowed_directories", {})
    call("fs list_directory", "fs__list_directory", {"path": fsroot})
    call("fs read a.txt (structuredContent + text)", "fs__read_text_file", {"path": f"{fsroot}/a.txt"})
    call("fs read a.txt repeat (reference)", "fs__read_text_file", {"path": f"{fsroot}/a.txt"})
    bigread = call("fs read big.txt (3000 lines: bounded to budget, elided)", "fs__read_text_file", {"path": big})
    bid = first_id(bigread, "big.txt read")[0]
    call("expand big.txt id, lines 1500-1520", "devboy_expand", {"id": bid, "lines": "1500-1520"})
    call("fs read big.txt head=50 (a different call of the same path)", "fs__read_text_file", {"path": big, "head": 50})
    call("fs read repeated.txt (repeated content)", "fs__read_text_file", {"path": f"{fsroot}/repeated.txt"})
    call("fs read_multiple_files a.txt+b.txt", "fs__read_multiple_files",
         {"paths": [f"{fsroot}/a.txt", f"{fsroot}/b.txt"]})
    call("fs search_files **/*.md (speculation: the hits are prefetched)", "fs__search_files",
         {"path": fsroot, "pattern": "**/*.md"})
    wait_speculation_settled(status_cmd, log)
    call("fs read a search hit (answered from the prefetch)", "fs__read_text_file",
         {"path": f"{fsroot}/docs/guide.md"})
    # --- compaction: what the model held is forgotten ------------------
    call("compact", "devboy_compact", {})
    call("payload 3000 after compact (full again, new id)", "t__payload", {"bytes": 3000})
    call("fs read a.txt after compact (full again)", "fs__read_text_file", {"path": f"{fsroot}/a.txt"})
    # --- errors ----------------------------------------------------------
    call("unknown tool name (JSON-RPC error)", "t__no_such_tool", {})
    call("built-in with wrong argument types (isError result)", "devboy_expand",
         {"id": 12345, "lines": ["x"], "raw": "yes"})
    call("upstream with wrong argument types (upstream's error)", "t__payload", {"bytes": "many"})
    call("fail (isError: true)", "t__fail", {})
    call("expand an id never issued", "devboy_expand", {"id": "zzzz999"})
    call("status at the end (built-in; volatile fields normalised)", "devboy_status", {})
    req("ping", {}, "ping")

    rc = s.close()
    with open(os.path.join(rawdir, "notifications.json"), "w") as f:
        json.dump(s.notifications, f, indent=1)
    log.close()

    # The response lines exactly as devboy wrote them, one per step
    # (normalise.py turns them into OUTDIR/responses.jsonl).
    with open(os.path.join(rawdir, "responses.raw.jsonl"), "w", encoding="utf-8") as f:
        for line in responses:
            f.write(line if line.endswith("\n") else line + "\n")
    with open(os.path.join(rawdir, "calls.raw.txt"), "w") as f:
        f.write("# N method params -- what it exercises (line N of responses.jsonl answers step N)\n")
        for i, (method, params, label) in enumerate(steps, 1):
            f.write(f"{i:2d} {method} {json.dumps(params, sort_keys=True)} -- {label}\n")
    print(f"driver: {len(steps)} requests, {ncalls} tools/call, devboy exit {rc}", file=sys.stderr)
    if rc != 0:
        raise SystemExit(f"driver: devboy exited {rc}")


if __name__ == "__main__":
    main()
