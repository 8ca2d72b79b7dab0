#!/bin/bash
# The whole limit/escape matrix for both workers; default limits --timeout-ms 1000 --memory-mib 64 --stack-kib 1024.
cd /tmp/codemode-eval
export KILL_AFTER=6
S="loop loop-catch loop-finally loop-after-await loop-limit-bypass microtask-flood microtask-count regex-redos native-indexof native-includes native-join native-reverse native-copywithin membomb membomb-fill membomb-catch membomb-string membomb-buffer recursion recursion-catch recursion-args nested-tostring-1e5 nested-stringify-1e5 nested-parse deep-eval crash-stack-overflow-native atomics-wait import import-catch require eval eval-import await-nothing calls201-parallel syntax error-line bigint-mix"
for s in $S; do ./run-limits.sh qjs $s; done
for s in $S; do ./run-limits.sh boa $s; done
echo "-- boa with a loop-iteration limit of 1e7 per frame"
for s in loop loop-catch loop-after-await loop-limit-bypass; do ./run-limits.sh boa $s --loop-limit 10000000; done
echo "-- sequential 201 calls (5 s wall limit)"
for e in qjs boa; do ./run-limits.sh $e calls201 --timeout-ms 5000; done
echo "-- cancel from another thread after 300 ms (5 s wall limit)"
for s in hang loop loop-after-await regex-redos microtask-count; do for e in qjs boa; do ./run-limits.sh $e $s --timeout-ms 5000 --cancel-after-ms 300; done; done
echo "-- wall limit while awaiting a tool that never answers"
for e in qjs boa; do ./run-limits.sh $e hang; done
echo "-- engine stack limit set above the thread's stack (qjs), the process dies"
./run-limits.sh qjs recursion --stack-kib 65536 --thread-stack-kib 1024
./run-limits.sh qjs nested-parse --stack-kib 0 --thread-stack-kib 1024
