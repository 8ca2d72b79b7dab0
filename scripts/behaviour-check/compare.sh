#!/usr/bin/env bash
# compare.sh NEWBIN NEWSERVER
#
# Runs run.sh with the new devboy and test server into $BEHAVIOUR_CHECK_DIR/after and
# compares it with the baseline in $BEHAVIOUR_CHECK_DIR/before (default
# /tmp/devboy-behaviour-check; make it with `run.sh OLDBIN OLDSERVER .../before` from the
# commit before a change), byte for byte (OUTDIR/env,
# which holds the un-normalised raw files, HOME and logs, is not compared).
# Exit 0: identical.  1: differences (listed).  2: the run itself failed.
set -uo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 NEWBIN NEWSERVER" >&2
    exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="${BEHAVIOUR_CHECK_DIR:-/tmp/devboy-behaviour-check}"
BEFORE="$WORK/before"
AFTER="$WORK/after"
[ -d "$BEFORE" ] || { echo "compare.sh: no baseline at $BEFORE (run run.sh first)" >&2; exit 2; }

if ! "$HERE/run.sh" "$1" "$2" "$AFTER"; then
    echo "VERDICT: FAILED -- run.sh did not complete with the new binaries (see $AFTER/env/raw/)"
    exit 2
fi

FILES=(octokit.json octokit.deliveries.jsonl calls.txt responses.jsonl session.jsonl replay.json replay.deliveries.jsonl)
status=0
echo
echo "file                        result"
for f in "${FILES[@]}"; do
    if [ ! -f "$AFTER/$f" ]; then
        printf '%-27s MISSING in after\n' "$f"; status=1
    elif cmp -s "$BEFORE/$f" "$AFTER/$f"; then
        printf '%-27s identical (%s bytes)\n' "$f" "$(stat -c %s "$AFTER/$f")"
    else
        printf '%-27s DIFFERS\n' "$f"; status=1
    fi
done
# Anything else at the top level (a file only one side has).
extra=$(diff -rq --exclude=env "$BEFORE" "$AFTER" | grep -v -E "^Files .* differ$" || true)
if [ -n "$extra" ]; then
    echo "$extra"; status=1
fi

if [ $status -ne 0 ]; then
    echo
    # Which steps of the session answered differently, by their calls.txt line.
    python3 - "$BEFORE" "$AFTER" <<'EOF'
import sys
b, a = sys.argv[1], sys.argv[2]
def lines(p):
    try:
        return open(p, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        return []
calls = [l for l in lines(f"{b}/calls.txt") if not l.startswith("#")]
rb, ra = lines(f"{b}/responses.jsonl"), lines(f"{a}/responses.jsonl")
if rb != ra:
    print(f"responses.jsonl: {len(rb)} lines before, {len(ra)} after; steps answering differently:")
    for i in range(max(len(rb), len(ra))):
        x = rb[i] if i < len(rb) else None
        y = ra[i] if i < len(ra) else None
        if x != y:
            label = calls[i] if i < len(calls) else "(no such step before)"
            print(f"  step {label[:150]}")
for name in ("octokit.deliveries.jsonl", "replay.deliveries.jsonl", "session.jsonl"):
    xb, xa = lines(f"{b}/{name}"), lines(f"{a}/{name}")
    if xb != xa:
        n = sum(1 for i in range(max(len(xb), len(xa)))
                if (xb[i] if i < len(xb) else None) != (xa[i] if i < len(xa) else None))
        print(f"{name}: {n} of {max(len(xb), len(xa))} lines differ")
EOF
    echo
    echo "first differences (diff -r, truncated):"
    diff -r --exclude=env "$BEFORE" "$AFTER" | cut -c1-300 | head -60
    echo
    echo "VERDICT: DIFFERENT -- the new binaries do not behave byte-for-byte like the baseline"
    exit 1
fi
echo
echo "VERDICT: IDENTICAL -- octokit replay, live session responses, capture and its replay match the baseline byte for byte"
exit 0
