#!/usr/bin/env bash
# The hermetic tier: the tests of the crates that need no node, npm or pip
# peers (configuration, the pipeline, the session, the planner, explore,
# retrieval, telemetry). Runs on a machine with only the Rust toolchain;
# tests/run.sh runs everything, these included, against the real peers.
# Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec cargo test \
  -p devboy-core -p devboy-pipeline -p devboy-session -p devboy-enrichment \
  -p devboy-explore -p devboy-retrieval -p devboy-telemetry -p devboy-code "$@"
