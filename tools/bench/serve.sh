#!/bin/sh
# serve.sh LOADGEN OUT ROUNDS "N C PROMPT OUTPUT [T]" LABEL=COMMAND...: one
# streaming load against several servers, the servers interleaved round by
# round. COMMAND starts one OpenAI-compatible server on this machine and
# contains @PORT@, where the port goes; the server must print a line with
# "listening on http://" when it takes requests. Each run: a fresh server,
# `loadgen --ignore-eos --no-probe -n N -c C --prompt-tokens PROMPT
# --output-tokens OUTPUT --temperature T --json` (T default 1, the OpenAI
# API's default; only the temperature is sent, so each server samples with
# its own defaults for the rest), the server stopped. Prints one line per
# server: the median over its completed rounds of output tokens/s (and their
# spread), TTFT p50, inter-token p50 and p99, and the ratio of its tokens/s
# to the first server's; then the last "engine:" line each server printed
# when it stopped, if it prints one. Writes OUT/serve.json (one object per
# server, null where no round completed) and keeps every run's loadgen JSON
# and server log in OUT/serve/ (a failed run's JSON as K-ROUND.failed.json,
# out of the medians). make bench-serve and make bench-chunk run it. Exit 1
# if a run failed.
set -u
loadgen=${1:?usage: serve.sh LOADGEN OUT ROUNDS "N C PROMPT OUTPUT [T]" LABEL=COMMAND...}
out=${2:?}; rounds=${3:?}; load=${4:?}
shift 4
[ $# -ge 1 ] || { echo "serve.sh: no server given" >&2; exit 2; }
parse_load() { # parse_load N C PROMPT OUTPUT [T]
    [ $# -eq 4 ] || [ $# -eq 5 ] || { echo "serve.sh: the load is N C PROMPT OUTPUT [T], got '$load'" >&2; exit 2; }
    n=$1; c=$2; prompt=$3; output=$4; temp=${5:-1}
}
# shellcheck disable=SC2086 # the load: numbers, split on purpose
parse_load $load
rm -rf "$out/serve"; mkdir -p "$out/serve" || exit 2   # this run's files only
port=$((20000 + $$ % 20000))
pid=
trap '[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null' EXIT   # no server outlives the script
trap 'exit 1' INT TERM HUP

stop() { # the server, and wait for it (KILL after 10 s)
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    pid=
}

run() { # run K ROUND COMMAND: server K's run of that round; its JSON in $out/serve/K-ROUND.json
    log=$out/serve/$1-$2.log
    for _ in 1 2 3 4 5; do   # a port another program holds: the next one
        port=$((port + 1))
        cmd=$(printf '%s' "$3" | sed "s/@PORT@/$port/g")
        sh -c "exec $cmd" >"$log" 2>&1 &
        pid=$!
        for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break
            grep -q 'listening on http://' "$log" && break; sleep 0.1; done
        grep -q 'listening on http://' "$log" && break
        stop
    done
    [ -n "$pid" ] || return 1
    "$loadgen" --url "http://127.0.0.1:$port" -n "$n" -c "$c" --prompt-tokens "$prompt" --no-probe \
        --output-tokens "$output" --temperature "$temp" --ignore-eos --json >"$out/serve/$1-$2.json"
    rc=$?
    stop
    [ "$rc" -eq 0 ] || mv "$out/serve/$1-$2.json" "$out/serve/$1-$2.failed.json"
    return $rc
}

num() { # num FILE KEY: a number member of loadgen's JSON (nothing when null)
    sed -n "s/.*\"$2\":\([0-9-][0-9.e+-]*\).*/\1/p" "$1" | head -n 1
}
pct() { # pct FILE KEY P: percentile P (p50, p99) of one of loadgen's stats objects
    sed -n "s/.*\"$2\":{[^}]*\"$3\":\([0-9-][0-9.e+-]*\).*/\1/p" "$1" | head -n 1
}
median() { # "median lo hi" of the numbers on stdin, one a line; "null null null" for none
    grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "null null null"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}
ms() { # a figure in ms for the table, or "-"
    case $1 in null) printf '%10s' - ;; *) printf '%7.0f ms' "$1" ;; esac
}

failed=0
for r in $(seq "$rounds"); do
    k=0
    for spec in "$@"; do
        k=$((k + 1))
        run "$k" "$r" "${spec#*=}" ||
            { echo "serve: ${spec%%=*}, round $r failed (see $out/serve/$k-$r.log)" >&2; failed=1; }
    done
done

printf 'Serving %d streaming requests, %d at a time, %d prompt words + %d output tokens each, temperature %s; medians of %d rounds\n' \
    "$n" "$c" "$prompt" "$output" "$temp" "$rounds"
printf '  %-34s %13s %13s %10s %10s %10s %6s\n' server "output tok/s" spread "TTFT p50" "ITL p50" "ITL p99" ratio
k=0; first=; json=
for spec in "$@"; do
    k=$((k + 1)); label=${spec%%=*}
    files=$(ls "$out/serve/$k"-*.json 2>/dev/null | grep -v failed)
    read -r tps lo hi <<EOF
$(for f in $files; do num "$f" output_tokens_per_s; done | median)
EOF
    ttft=$(for f in $files; do pct "$f" ttft_ms p50; done | median | cut -d' ' -f1)
    i50=$(for f in $files; do pct "$f" itl_ms p50; done | median | cut -d' ' -f1)
    i99=$(for f in $files; do pct "$f" itl_ms p99; done | median | cut -d' ' -f1)
    [ -n "$first" ] || first=$tps
    ratio=$(awk -v a="$first" -v b="$tps" 'BEGIN { if (a == "null" || b == "null" || a <= 0) print "null"; else printf "%.2f", b / a }')
    if [ "$tps" = null ]; then printf '  %-34s %13s %13s' "$label" - "no round"
    else printf '  %-34s %13.2f %13s' "$label" "$tps" "$(awk -v a="$lo" -v b="$hi" 'BEGIN { printf "%.1f-%.1f", a, b }')"; fi
    printf ' %s %s %s %6s\n' "$(ms "$ttft")" "$(ms "$i50")" "$(ms "$i99")" "$(echo "$ratio" | sed 's/null/-/')"
    json="$json${json:+,}{\"server\":\"$label\",\"tps\":$tps,\"tps_lo\":$lo,\"tps_hi\":$hi,\"ttft_p50_ms\":$ttft,\"itl_p50_ms\":$i50,\"itl_p99_ms\":$i99,\"ratio\":$ratio}"
done
k=0
for spec in "$@"; do   # where each engine's time went, in the last round
    k=$((k + 1))
    line=$(grep '^engine:' "$out/serve/$k-$rounds.log" 2>/dev/null | tail -n 1)
    [ -z "$line" ] || printf '  %s: %s\n' "${spec%%=*}" "$line"
done
printf '{"requests":%d,"concurrency":%d,"prompt_words":%d,"output_tokens":%d,"temperature":%s,"rounds":%d,"servers":[%s]}\n' \
    "$n" "$c" "$prompt" "$output" "$temp" "$rounds" "$json" >"$out/serve.json"
exit $failed
