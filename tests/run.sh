#!/usr/bin/env bash
# devboy's whole test suite, as a new user (and CI) runs it:
#   1. installs the pinned real test peers (npm + PyPI) into tests/peers/
#      (skipped in a moment when already installed),
#   2. runs every test of the workspace against them.
# Extra arguments go to `cargo test` (e.g. `tests/run.sh --test proxy_resilience`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tests/peers/install.sh
exec cargo test --workspace "$@"
