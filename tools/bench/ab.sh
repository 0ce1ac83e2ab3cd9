#!/bin/sh
# ab.sh SERVER LOADGEN MODEL OUT [N C PROMPT OUTPUT]: III.7's A/B. The same load
# (N streaming requests, C at a time, PROMPT-token prompts, OUTPUT tokens each)
# against chat-server with --max-concurrent 1 and with --max-concurrent C, one
# after the other in one run; prints both and the ratio of aggregate output
# tokens/s, and writes OUT/ab.json. Loopback only; the servers stop by themselves.
set -u
server=${1:?usage: ab.sh SERVER LOADGEN MODEL OUT [N C PROMPT OUTPUT]}
loadgen=${2:?}; model=${3:?}; out=${4:?}
n=${5:-16}; c=${6:-8}; prompt=${7:-64}; output=${8:-32}
mkdir -p "$out" || exit 2
port=$((20000 + $$ % 20000))

run() { # run SLOTS: one server, one load; its JSON in $out/ab-SLOTS.json
    "$server" "$model" --bind "127.0.0.1:$port" --max-concurrent "$1" --queue "$n" >"$out/ab-server-$1.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break
        grep -q listening "$out/ab-server-$1.log" && break; sleep 0.1; done
    "$loadgen" --url "http://127.0.0.1:$port" -n "$n" -c "$c" --prompt-tokens "$prompt" \
        --output-tokens "$output" --json >"$out/ab-$1.json"
    rc=$?
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    return $rc
}

tps() { sed -n 's/.*"output_tokens_per_s":\([0-9.e+-]*\).*/\1/p' "$1" | head -n 1; }

run 1 || { echo "ab: the --max-concurrent 1 run failed (see $out/ab-server-1.log)" >&2; exit 1; }
run "$c" || { echo "ab: the --max-concurrent $c run failed (see $out/ab-server-$c.log)" >&2; exit 1; }
a=$(tps "$out/ab-1.json"); b=$(tps "$out/ab-$c.json")
ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }')
printf 'A/B on %s: %d requests, %d at a time, %d prompt + %d output tokens\n' "$model" "$n" "$c" "$prompt" "$output"
printf '  --max-concurrent 1   %8.1f output tokens/s\n' "$a"
printf '  --max-concurrent %-3d %8.1f output tokens/s\n' "$c" "$b"
printf '  ratio                %8s\n' "$ratio"
printf '{"model":"%s","requests":%d,"concurrency":%d,"prompt_tokens":%d,"output_tokens":%d,"tps_1":%s,"tps_n":%s,"ratio":"%s"}\n' \
    "$model" "$n" "$c" "$prompt" "$output" "$a" "$b" "$ratio" >"$out/ab.json"
