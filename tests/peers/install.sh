#!/usr/bin/env bash
# Installs devboy's pinned test peers (real MCP servers and clients):
#   - tmux from Debian, when missing (a terminal for interactive Claude Code)
#   - chromium from Debian, when missing (renders `devboy tune report --html`
#     headless, tests/tune_report.rs)
#   - npm packages from package-lock.json into tests/peers/node_modules (npm ci),
#     among them Azurite, the Azure Storage emulator (azurite-blob)
#   - Python packages from requirements.txt into tests/peers/.venv, among them
#     moto's S3-compatible server (moto_server) and uv (uvx)
#   - the official MCP conformance suite, the Node 22 it needs and the SDK
#     devboy's conformance target server uses, from tests/conformance's
#     package-lock.json into tests/conformance/node_modules (npm ci)
# Idempotent: a stamp file records a hash of the lock inputs; when it matches
# and the installed peers are present, the script exits immediately.
# Usage: tests/peers/install.sh [--force]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
stamp="$here/.stamp"

force=0
if [[ "${1:-}" == "--force" ]]; then force=1; fi

# One installer at a time (parallel test runs may all call this script).
if command -v flock >/dev/null; then
  exec 9>"$here/.stamp.lock"
  flock 9
fi

conformance="$here/../conformance"
hash="$(cat package.json package-lock.json requirements.txt "$conformance/package.json" "$conformance/package-lock.json" | sha256sum | cut -d' ' -f1)"

installed() {
  command -v tmux >/dev/null && command -v chromium >/dev/null && [[ -x node_modules/.bin/claude && -x node_modules/.bin/mcp-server-everything \
     && -x node_modules/.bin/mcp-server-filesystem && -x node_modules/.bin/mcp-server-memory \
     && -f node_modules/@octokit/fixtures/package.json && -f node_modules/@octokit/openapi/package.json \
     && -x node_modules/.bin/azurite-blob \
     && -x .venv/bin/python && -x .venv/bin/mcp-server-time && -x .venv/bin/mcp-server-git \
     && -x .venv/bin/moto_server && -x .venv/bin/uvx \
     && -x "$conformance/node_modules/.bin/conformance" && -x "$conformance/node_modules/.bin/node" ]]
}

if [[ $force -eq 0 && -f "$stamp" && "$(cat "$stamp")" == "$hash" ]] && installed; then
  exit 0
fi

rm -f "$stamp"

command -v npm >/dev/null || { echo "install.sh: npm not found (need Node.js >= 20)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "install.sh: python3 not found (need Python >= 3.10)" >&2; exit 1; }

# tmux gives the interactive Claude Code test a terminal (Debian package).
if ! command -v tmux >/dev/null; then
  echo "install.sh: installing tmux (apt-get)" >&2
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq >&2 && apt-get install -y -qq tmux >&2
  else
    sudo apt-get update -qq >&2 && sudo apt-get install -y -qq tmux >&2
  fi
fi

# chromium renders the report page in a real browser (Debian package).
if ! command -v chromium >/dev/null; then
  echo "install.sh: installing chromium (apt-get)" >&2
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  else
    sudo apt-get update -qq >&2 && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  fi
fi

echo "install.sh: installing npm test peers (npm ci)" >&2
npm ci --no-audit --no-fund --loglevel=error >&2

# Claude Code's postinstall swaps its bin/claude.exe placeholder for the native
# binary. If the npm in use skipped lifecycle scripts, run it ourselves.
if ! node_modules/.bin/claude --version >/dev/null 2>&1; then
  (cd node_modules/@anthropic-ai/claude-code && node install.cjs) >&2
fi
node_modules/.bin/claude --version >/dev/null

echo "install.sh: installing the MCP conformance suite (npm ci in tests/conformance)" >&2
(cd "$conformance" && npm ci --no-audit --no-fund --loglevel=error >&2)
# The `node` package fetches its binary in a lifecycle script; without it
# (an npm that skips scripts) the suite has no Node 22 to run on.
"$conformance/node_modules/.bin/node" --version >/dev/null

echo "install.sh: installing Python test peers into .venv" >&2
# Always a fresh venv, so packages dropped from requirements.txt do not linger.
rm -rf .venv
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt >&2

installed || { echo "install.sh: peers still missing after install" >&2; exit 1; }
echo "$hash" > "$stamp"
echo "install.sh: test peers installed" >&2
