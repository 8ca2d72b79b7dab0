#!/bin/bash
# usage: run-limits.sh ENGINE SCRIPT [worker args...]; prints: engine script exit wall_s output
# Each run: address-space cap 4 GiB (safety net for engines without a heap limit), SIGKILL after ${KILL_AFTER:-15} s.
e=$1; s=$2; shift 2
bin=/tmp/codemode-eval/target-$e/release/$e-eval
start=$(date +%s.%N)
out=$( (ulimit -v 4194304; timeout -s KILL ${KILL_AFTER:-15} $bin --timeout-ms 1000 --memory-mib 64 --stack-kib 1024 "$@" < /tmp/codemode-eval/scripts/$s.js) 2>&1 )
rc=$?
end=$(date +%s.%N)
printf '%-4s %-28s rc=%-3s wall=%5.2fs %s\n' "$e" "$s" "$rc" "$(echo "$end - $start" | bc)" "$(echo "$out" | tr '\n' ' ' | cut -c1-400)"
