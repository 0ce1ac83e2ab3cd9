#!/bin/bash
# bench.sh SERVER LOADGEN MODEL OUT K T C SYSTEM USER OUTPUT: make bench-replicas.
# Two replicas behind HAProxy (tools/replicas/run.sh), and the same multi-turn
# load (loadgen --conversations K --turns T, C conversations at a time,
# SYSTEM-token system prompts, USER-token user messages, OUTPUT tokens per
# answer) three times, fresh replicas each time:
#   roundrobin  the balancer ignores the prefix
#   prefix      the repository's config: consistent hashing on the prefix
#   kill        prefix again, and one replica killed (SIGKILL) a third of the way in
# Prints the share of prompt tokens read from the prefix caches, TTFT p50/p90
# and output tokens/s of each, what the kill cost, and writes OUT/replicas.json.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 10 ]; then
    echo "usage: bench.sh SERVER LOADGEN MODEL OUT K T C SYSTEM USER OUTPUT" >&2
    exit 2
fi
server=$1 loadgen=$2 model=$3 out=$4 k=$5 t=$6 c=$7 system=$8 user=$9 output=${10}
mkdir -p "$out" || exit 2

# A free port for the balancer: the first from 18300 nobody answers on.
port=18300
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done

runpid=
start() { # start BALANCE NAME: replicas and balancer, in the background
    "$here/run.sh" --balance "$1" --port "$port" --dir "$out/replicas-$2" "$server" "$model" 2 \
        >"$out/replicas-$2.out" 2>&1 &
    runpid=$!
    for _ in $(seq 1 1200); do
        grep -q '^balancer' "$out/replicas-$2.out" && return 0
        kill -0 "$runpid" 2>/dev/null || break
        sleep 0.1
    done
    echo "bench-replicas: the replicas did not start; $out/replicas-$2.out says:" >&2
    cat "$out/replicas-$2.out" >&2
    exit 1
}
stop() {
    kill -TERM "$runpid" 2>/dev/null
    wait "$runpid" 2>/dev/null
}
trap 'stop; exit 130' INT TERM

load() { # load NAME: the load, its JSON in OUT/replicas-NAME.json
    "$loadgen" --url "http://127.0.0.1:$port" --conversations "$k" --turns "$t" -c "$c" \
        --system-tokens "$system" --prompt-tokens "$user" --output-tokens "$output" --ignore-eos \
        --timeout 300 --json --samples >"$out/replicas-$1.json"
}

# loadgen's JSON is one line; its summary members come before by_turn and per_request.
num() { # num FILE KEY: the first number member KEY
    grep -o "\"$2\":[0-9.e+-]*" "$1" | head -n 1 | cut -d: -f2
}
stat() { # stat FILE KEY P: percentile P (p50, p90) of the first stats object KEY
    grep -o "\"$2\":{[^}]*}" "$1" | head -n 1 | grep -o "\"$3\":[0-9.e+-]*" | cut -d: -f2
}

echo "bench-replicas: $k conversations x $t turns, $c at a time, system $system + user $user tokens, $output out; 2 replicas of $model"
for b in roundrobin prefix; do
    start "$b" "$b"
    t0=$(date +%s.%N)
    load "$b"
    rc=$?
    echo "  $b: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s, loadgen exit $rc"
    stop
    [ "$rc" = 0 ] || { echo "bench-replicas: the $b run failed: see $out/replicas-$b.json" >&2; exit 1; }
done

# The kill: a third of the way in (counted in the balancer's log lines, one
# per answered request), SIGKILL the replica that has answered most so far.
start prefix kill
load kill &
lpid=$!
log=$out/replicas-kill/haproxy.log
need=$(( k * t / 3 )); [ "$need" -gt 0 ] || need=1
while kill -0 "$lpid" 2>/dev/null && [ "$(grep -c '/v1/chat/completions' "$log" 2>/dev/null)" -lt "$need" ]; do sleep 0.2; done
busiest=$(grep -o 'replicas/replica[0-9]*' "$log" | sort | uniq -c | sort -rn | head -1 | sed 's/.*replicas\///')
victim=$(sed -n "s/^replica $busiest .* pid \([0-9]*\)$/\1/p" "$out/replicas-kill.out")
tk=$(date +%s.%N)
[ -n "$victim" ] && kill -KILL "$victim"
echo "  kill: $busiest (pid $victim) killed after $need answers"
wait "$lpid"
krc=$?
echo "  kill: loadgen exit $krc (1: some requests failed), $(awk -v a="$tk" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }') s after the kill"
stop

row() { # row NAME
    f=$out/replicas-$1.json
    printf '  %-11s %6.1f%%  %9.0f %9.0f  %8.2f  %4s of %-4s %s\n' "$1" \
        "$(awk -v x="$(num "$f" cached_share)" 'BEGIN { print 100 * x }')" "$(stat "$f" ttft_ms p50)" \
        "$(stat "$f" ttft_ms p90)" "$(num "$f" output_tokens_per_s)" "$(num "$f" completed)" "$(num "$f" requests)" \
        "$(sed -n 's/.*"error_kinds":{\([^}]*\)}.*/\1/p' "$f" | tr -d '"' | sed 's/[a-z_]*:0,\{0,1\}//g; s/,$//')"
}
echo
echo "  balance      cached  TTFT p50  TTFT p90  output/s  completed  errors"
echo "                    %        ms        ms  tokens/s"
for r in roundrobin prefix kill; do row "$r"; done
echo "  (cached: the share of prompt tokens read from a replica's prefix cache; kill: incomplete are the"
echo "   streams the killed replica was sending, skipped the later turns of their conversations)"

json() { # json NAME: one run's figures
    f=$out/replicas-$1.json
    printf '"%s":{"cached_share":%s,"ttft_p50_ms":%s,"ttft_p90_ms":%s,"output_tokens_per_s":%s,"completed":%s,"requests":%s,"errors":%s}' \
        "$1" "$(num "$f" cached_share)" "$(stat "$f" ttft_ms p50)" "$(stat "$f" ttft_ms p90)" \
        "$(num "$f" output_tokens_per_s)" "$(num "$f" completed)" "$(num "$f" requests)" "$(num "$f" errors)"
}
printf '{"conversations":%d,"turns":%d,"concurrency":%d,"system_tokens":%d,"user_tokens":%d,"output_tokens":%d,%s,%s,%s}\n' \
    "$k" "$t" "$c" "$system" "$user" "$output" "$(json roundrobin)" "$(json prefix)" "$(json kill)" >"$out/replicas.json"
echo "  wrote $out/replicas.json"
