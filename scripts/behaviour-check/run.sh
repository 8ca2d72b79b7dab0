#!/usr/bin/env bash
# Behaviour baseline of devboy's call path.
#
#   run.sh DEVBOY_BIN TEST_SERVER_BIN OUTDIR
#
# Produces in OUTDIR:
#   octokit.json            devboy replay --format json <every octokit raw-fixture.json, sorted>
#   octokit.deliveries.jsonl  the same replay's --deliveries (each result as the model saw it)
#   session.jsonl           the --capture of a scripted `devboy mcp` session (tag normalised, see below)
#   responses.jsonl         every JSON-RPC response of that session, normalised (normalise.py)
#   calls.txt               the session's tools/call steps, numbered, with what each exercises
#   replay.json             devboy replay --format json --pipeline-config PIPELINE OUTDIR/session.jsonl
#   replay.deliveries.jsonl that replay's --deliveries (each result as the replay delivered it)
#   env/                    HOME, XDG dirs, configs, raw (un-normalised) outputs, stderr: for
#                           debugging, not compared
#
# Everything runs with a fresh HOME and XDG dirs under OUTDIR/env, DEVBOY_TELEMETRY=off and
# an otherwise empty environment (env -i), so nothing of the user's own setup applies.
# The filesystem server is rooted at a FIXED path (BEHAVIOUR_CHECK_DIR/fsroot, default /tmp/devboy-behaviour-check, recreated with
# fixed content and mtimes on every run) so that its paths -- which are inside tool results
# and therefore inside token counts -- are the same bytes whatever OUTDIR is.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 DEVBOY_BIN TEST_SERVER_BIN OUTDIR" >&2
    exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEVBOY="$(realpath "$1")"
SERVER="$(realpath "$2")"
OUT="$(realpath -m "$3")"
PEERS="$HERE/../../tests/peers/node_modules"  # tests/peers/install.sh puts them there
FS_BIN="$PEERS/.bin/mcp-server-filesystem"
WORK="${BEHAVIOUR_CHECK_DIR:-/tmp/devboy-behaviour-check}"
mkdir -p "$WORK"
FSROOT="$WORK/fsroot"

for f in "$DEVBOY" "$SERVER" "$FS_BIN"; do
    [ -x "$f" ] || { echo "run.sh: not executable: $f" >&2; exit 2; }
done

# One run at a time: the fs root is a fixed, shared path.
exec 9>"$WORK/.lock"
flock 9

rm -rf "$OUT"
ENV="$OUT/env"
mkdir -p "$ENV"/{home,config,cache,data,state,runtime,raw,devboy-config,devboy-cache}
chmod 700 "$ENV/runtime"

# ------------------------------------------------------------------ fs root
rm -rf "$FSROOT"
python3 "$HERE/make_fsroot.py" "$FSROOT"
# Fixed mtimes (directory listings / file info never depend on when we ran).
find "$FSROOT" -exec touch -h -d '2020-01-01 00:00:00 UTC' {} +
# devboy keys its context-partition file by the canonical working (project)
# directory, and devboy_status prints that file's name: run from a fixed one.
cd "$FSROOT"

# ------------------------------------------------------------------ configs
CONF="$ENV/devboy.toml"
PIPE="$ENV/pipeline_config.toml"
cat >"$CONF" <<EOF
[servers.t]
command = "$SERVER"

[servers.fs]
command = "$FS_BIN"
args = ["$FSROOT"]
EOF
# The format of tests/capture_replay.rs: polls get near references; a small
# budget makes large results elided.
cat >"$PIPE" <<'EOF'
schema_version = 3
[endpoints."t__poll"]
near_ref = true
[encoding]
budget_tokens = 450
EOF

# A clean, fixed environment for every devboy process.
RUN=(env -i
    PATH=/usr/local/bin:/usr/bin:/bin
    LANG=C.UTF-8 LC_ALL=C.UTF-8 TZ=UTC
    HOME="$ENV/home"
    XDG_CONFIG_HOME="$ENV/config"
    XDG_CACHE_HOME="$ENV/cache"
    XDG_DATA_HOME="$ENV/data"
    XDG_STATE_HOME="$ENV/state"
    XDG_RUNTIME_DIR="$ENV/runtime"
    DEVBOY_CONFIG_DIR="$ENV/devboy-config"
    DEVBOY_CACHE_DIR="$ENV/devboy-cache"
    DEVBOY_TELEMETRY=off
    TMPDIR="$ENV/tmp"
)
mkdir -p "$ENV/tmp"

# ------------------------------------------------------------------ 1. octokit
mapfile -t FIXTURES < <(find "$PEERS/@octokit/fixtures/scenarios" -name raw-fixture.json | LC_ALL=C sort)
"${RUN[@]}" "$DEVBOY" replay --format json --deliveries "$OUT/octokit.deliveries.jsonl" \
    "${FIXTURES[@]}" >"$OUT/octokit.json" 2>"$ENV/raw/octokit.stderr"

# ------------------------------------------------------------------ 2. session
"${RUN[@]}" python3 "$HERE/driver.py" "$OUT" "$FSROOT" -- \
    "$DEVBOY" mcp --config "$CONF" --pipeline-config "$PIPE" \
    --capture "$ENV/raw/session.raw.jsonl" --list-grace-ms 30000 \
    2>"$ENV/raw/driver.stderr" || { cat "$ENV/raw/driver.stderr" >&2; exit 1; }

python3 "$HERE/normalise.py" finish "$OUT" "$FSROOT"

# ------------------------------------------------------------------ 3. replay
# Of OUTDIR/session.jsonl (the capture, normalised: still a valid capture).
"${RUN[@]}" "$DEVBOY" replay --format json --pipeline-config "$PIPE" \
    --deliveries "$ENV/raw/replay.deliveries.jsonl" \
    "$OUT/session.jsonl" >"$ENV/raw/replay.json" 2>"$ENV/raw/replay.stderr"
python3 "$HERE/normalise.py" outdir "$ENV/raw/replay.json" "$OUT/replay.json" "$OUT"
python3 "$HERE/normalise.py" outdir "$ENV/raw/replay.deliveries.jsonl" "$OUT/replay.deliveries.jsonl" "$OUT"

# Check: the capture exactly as devboy wrote it (random tag, real at_ms)
# replays to the same report and, but for the tag, the same deliveries.
"${RUN[@]}" "$DEVBOY" replay --format json --pipeline-config "$PIPE" \
    --deliveries "$ENV/raw/replay-of-raw.deliveries.jsonl" \
    "$ENV/raw/session.raw.jsonl" >"$ENV/raw/replay-of-raw.json" 2>"$ENV/raw/replay-of-raw.stderr"
if ! cmp -s "$ENV/raw/replay-of-raw.json" "$ENV/raw/replay.json" ||
   ! cmp -s <(python3 "$HERE/normalise.py" tag "$ENV/raw/replay-of-raw.deliveries.jsonl" "$ENV/raw/session.raw.jsonl") \
            "$ENV/raw/replay.deliveries.jsonl"; then
    echo "run.sh: the replay of the raw capture differs from the replay of session.jsonl" >&2
    echo "        (normalising the capture changed what it replays to): see $ENV/raw/replay*" >&2
    exit 1
fi

echo "run.sh: wrote $OUT ($(grep -c ' tools/call ' "$OUT/calls.txt") tools/call)"
