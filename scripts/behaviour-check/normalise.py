#!/usr/bin/env python3
"""Normalisation of what varies between two runs of the same binary.

usage: normalise.py finish OUTDIR FSROOT

Reads OUTDIR/env/raw/{responses.raw.jsonl, session.raw.jsonl, calls.raw.txt}
and writes OUTDIR/responses.jsonl, OUTDIR/session.jsonl and OUTDIR/calls.txt.  All rewriting is TEXTUAL
on the bytes devboy wrote (no JSON re-serialisation), so everything not
listed below is compared byte for byte, key order and number formatting
included.  What is rewritten, and why (each found by diffing two runs of
the same binary, except N4 which is wall-clock by construction):

  N1 session tag.  Every devboy process draws a random 6-letter tag that
     prefixes every id it prints (`meuvas3`, in `[ref: meuvas3, ...]`,
     `devboy_expand meuvas6 items=...`).  The tag, read from the capture's
     `session` line, becomes `tagfix` (the fixed tag `devboy replay` itself
     uses), wherever it is followed by a digit.  Drawn tags and `tagfix`
     cost the same two o200k tokens, so no count depends on it.
  N2 upstream pids in devboy_status (`"pid":21237`) -> `"pid":"<pid>"`.
  N3 OUTDIR's absolute path (devboy_status `savings.config` and
     `partition_file`; replay.json `status.config`) -> `$OUTDIR`.
  N4 devboy_status `uptime_s` -> `"<uptime_s>"` (wall clock; 0 on every run
     seen, but a slow machine makes it 1).
  N5 the capture's `at_ms` (session clock when a result arrived, ms since
     start: 366, 368, ...) -> the result's ordinal (1, 2, ...), keeping the
     order.  session.jsonl stays a valid capture; run.sh replays both it
     and the raw capture and checks they report the same (at_ms only feeds
     the dedup TTL of 1800 s).
After rewriting, every file is checked: still valid JSON per line, and the
raw tag followed by a digit occurs nowhere.
"""

import json
import os
import re
import sys

FIXED_TAG = "tagfix"


def tag_re(tag):
    # The tag at the start of a word, or right after a JSON escape (\n, \t,
    # \r, \") -- ids also start lines of a hint -- and followed by a digit.
    return re.compile(r'(?:(?<=\\[nrt"])|(?<![A-Za-z0-9_]))' + re.escape(tag) + r"(?=[0-9])")


def norm_text(text, tag, outdir):
    text = tag_re(tag).sub(FIXED_TAG, text)
    text = text.replace(outdir, "$OUTDIR")
    # devboy_status is a JSON text inside a JSON string: its quotes are \".
    text = re.sub(r'(\\"pid\\":)[0-9]+', r'\1\\"<pid>\\"', text)
    text = re.sub(r'(\\"uptime_s\\":)[0-9]+', r'\1\\"<uptime_s>\\"', text)
    return text


def check_no_tag(path, tag):
    raw = re.compile(re.escape(tag) + r"[0-9]")
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            json.loads(line)  # still JSON
            if raw.search(json.dumps(json.loads(line), ensure_ascii=False)) or raw.search(line):
                sys.exit(f"normalise: {path}:{n}: the session tag {tag!r} is left")


def finish(outdir, fsroot):
    outdir = os.path.realpath(outdir)
    raw = os.path.join(outdir, "env", "raw")
    with open(os.path.join(raw, "session.raw.jsonl"), encoding="utf-8") as f:
        capture = f.read().splitlines()
    first = json.loads(capture[0])
    assert first["kind"] == "session", first
    tag = first["tag"]
    if tag == FIXED_TAG:
        sys.exit("normalise: the live tag is the fixed tag; cannot tell them apart")

    # responses.jsonl
    out = os.path.join(outdir, "responses.jsonl")
    with open(os.path.join(raw, "responses.raw.jsonl"), encoding="utf-8") as f, \
            open(out, "w", encoding="utf-8") as g:
        for line in f:
            g.write(norm_text(line.rstrip("\n"), tag, outdir) + "\n")
    check_no_tag(out, tag)

    # calls.txt (the driver's own record of what it sent: expand ids)
    with open(os.path.join(raw, "calls.raw.txt"), encoding="utf-8") as f, \
            open(os.path.join(outdir, "calls.txt"), "w", encoding="utf-8") as g:
        g.write(tag_re(tag).sub(FIXED_TAG, f.read()))

    # session.jsonl
    out = os.path.join(outdir, "session.jsonl")
    ordinal = 0
    with open(out, "w", encoding="utf-8") as g:
        for n, line in enumerate(capture):
            record = json.loads(line)
            if n == 0:
                line = line.replace(f'"tag":"{tag}"', f'"tag":"{FIXED_TAG}"', 1)
            line = norm_text(line, tag, outdir)
            if record["kind"] == "result":
                ordinal += 1
                # Top level only: inside a body's text the quotes are escaped.
                line, k = re.subn(r'(?<=[,{])"at_ms":[0-9]+', f'"at_ms":{ordinal}', line)
                if k != 1 or json.loads(line)["at_ms"] != ordinal:
                    sys.exit(f"normalise: capture line {n + 1}: at_ms not rewritten once")
            g.write(line + "\n")
    check_no_tag(out, tag)
    if json.loads(open(out).readline())["tag"] != FIXED_TAG:
        sys.exit("normalise: session line not rewritten")


def outdir_only(path_in, path_out, outdir):
    """N3 only (replay.json and its deliveries: the replay's tag is fixed)."""
    outdir = os.path.realpath(outdir)
    with open(path_in, encoding="utf-8") as f:
        text = f.read()
    with open(path_out, "w", encoding="utf-8") as g:
        g.write(text.replace(outdir, "$OUTDIR"))


if __name__ == "__main__":
    if sys.argv[1] == "finish":
        finish(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "tag":
        # N1 only, to stdout: tag FILE CAPTURE (the tag read from CAPTURE).
        live = json.loads(open(sys.argv[3]).readline())["tag"]
        sys.stdout.write(tag_re(live).sub(FIXED_TAG, open(sys.argv[2], encoding="utf-8").read()))
    elif sys.argv[1] == "outdir":
        outdir_only(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
