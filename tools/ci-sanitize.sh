#!/bin/sh
# ci-sanitize.sh: the reliability part of CI, timed. Runs, in order:
#   make test SANITIZE=1        the whole suite under ASan + UBSan (build/san-address)
#   make test SANITIZE=thread   the suites that run threads under TSan (build/san-thread)
#   make fuzz                   each fuzz target for FUZZ_SECONDS (default 30)
# every step even if one before failed, then one line per step with its time
# and result. Exits non-zero if any step failed. Run from anywhere; the
# environment's FUZZ_SECONDS and MAKEFLAGS (e.g. -j2) are passed on.
cd "$(dirname "$0")/.." || exit 2
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
summary=
failed=0

step() { # step NAME COMMAND...: runs it, its output shown, and records the time
    name=$1
    shift
    echo "== $name: $*"
    t0=$(date +%s)
    if "$@"; then result=ok; else result=FAILED; failed=1; fi
    summary="$summary$(printf '%-22s %5ds  %s' "$name" $(($(date +%s) - t0)) "$result")
"
}

step "asan+ubsan suite" make -j2 test SANITIZE=1
# TSan finds races, so it runs the suites whose code runs threads: the thread
# pool and backends (common), the servers and their engines (III.4, III.7,
# server, replicas, reliability) and loadgen's clients. The others (cross,
# exercises and the rest) run the same pool again, or no thread at all: under
# ASan+UBSan they run whole, and under TSan they took 17 of its 27 minutes.
TSAN_SUITES="common chapter-III.4 chapter-III.7 server replicas reliability loadgen"
step "tsan suite" make -j2 test SANITIZE=thread SUITES="$TSAN_SUITES"
step "fuzz (${FUZZ_SECONDS}s each)" make -j2 fuzz FUZZ_SECONDS="$FUZZ_SECONDS"
echo "== ci-sanitize summary"
printf '%s' "$summary"
exit $failed
