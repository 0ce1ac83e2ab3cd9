#!/bin/sh
# ab.sh SERVER LOADGEN MODEL OUT [N C PROMPT OUTPUT [SERVER_ARGS]]: III.7's A/B.
# The same load (N streaming requests, C at a time, PROMPT-word prompts, OUTPUT
# tokens each: loadgen --ignore-eos, so every answer has them all) against
# chat-server with --max-concurrent 1 and with --max-concurrent C, one after
# the other in one run; prints both, the ratio of aggregate output tokens/s and
# where each server's engine spent its time, and writes OUT/ab.json:
#   {"type":..,"requests":N,"concurrency":C,"prompt_tokens":PROMPT,"output_tokens":OUTPUT,
#    "tps_1":..,"tps_n":..,"ratio":..,"ttft_p50_ms_1":..,"ttft_p50_ms_n":..,"itl_p50_ms_1":..,"itl_p50_ms_n":..}
# (type: the model file's name after its last '-', as make bench names them).
# make bench runs it for every weight type, make bench-ab for one. Loopback
# only; the servers stop by themselves. Exit 1 if a run failed.
set -u
server=${1:?usage: ab.sh SERVER LOADGEN MODEL OUT [N C PROMPT OUTPUT [SERVER_ARGS]]}
loadgen=${2:?}; model=${3:?}; out=${4:?}
n=${5:-16}; c=${6:-8}; prompt=${7:-16}; output=${8:-64}; server_args=${9:-}
type=$(basename "$model" .gguf); type=${type##*-}
mkdir -p "$out" || exit 2

run() { # run SLOTS: one server, one load; its JSON in $out/ab-SLOTS.json
    # port 0: the system picks a free one, and the server's "listening" line says which
    # shellcheck disable=SC2086 # server_args: flags, split on purpose
    "$server" "$model" --bind "127.0.0.1:0" --max-concurrent "$1" --queue "$n" $server_args \
        >"$out/ab-server-$1.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break
        grep -q listening "$out/ab-server-$1.log" && break; sleep 0.1; done
    port=$(sed -n 's/.*listening on http:[/][/]127[.]0[.]0[.]1:\([0-9]*\).*/\1/p' "$out/ab-server-$1.log")
    [ -n "$port" ] || { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; return 1; }
    # --no-probe: PROMPT counts words, as the book's A/B figures always have
    "$loadgen" --url "http://127.0.0.1:$port" -n "$n" -c "$c" --prompt-tokens "$prompt" --no-probe \
        --output-tokens "$output" --ignore-eos --json >"$out/ab-$1.json"
    rc=$?
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    return $rc
}

num() { # num FILE KEY: a number member of loadgen's JSON
    sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p" "$1" | head -n 1
}
p50() { # p50 FILE KEY: the p50 of one of loadgen's stats objects
    sed -n "s/.*\"$2\":{[^}]*\"p50\":\([0-9.e+-]*\).*/\1/p" "$1" | head -n 1
}

run 1 || { echo "ab: the --max-concurrent 1 run failed (see $out/ab-server-1.log)" >&2; exit 1; }
run "$c" || { echo "ab: the --max-concurrent $c run failed (see $out/ab-server-$c.log)" >&2; exit 1; }
a=$(num "$out/ab-1.json" output_tokens_per_s); b=$(num "$out/ab-$c.json" output_tokens_per_s)
a=${a:-0}; b=${b:-0}
ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')
t1=$(p50 "$out/ab-1.json" ttft_ms); tn=$(p50 "$out/ab-$c.json" ttft_ms)
i1=$(p50 "$out/ab-1.json" itl_ms); in=$(p50 "$out/ab-$c.json" itl_ms)
t1=${t1:-0}; tn=${tn:-0}; i1=${i1:-0}; in=${in:-0}
printf 'A/B on %s: %d requests, %d at a time, %d prompt words + %d output tokens\n' "$model" "$n" "$c" "$prompt" "$output"
printf '  --max-concurrent 1   %8.2f output tokens/s  (TTFT p50 %.0f ms, ITL p50 %.0f ms)\n' "$a" "$t1" "$i1"
printf '  --max-concurrent %-3d %8.2f output tokens/s  (TTFT p50 %.0f ms, ITL p50 %.0f ms)\n' "$c" "$b" "$tn" "$in"
printf '  ratio                %8.2f\n' "$ratio"
for s in 1 "$c"; do printf '  --max-concurrent %-3d %s\n' "$s" "$(grep '^engine:' "$out/ab-server-$s.log")"; done
printf '{"type":"%s","requests":%d,"concurrency":%d,"prompt_tokens":%d,"output_tokens":%d,"tps_1":%s,"tps_n":%s,"ratio":%s,"ttft_p50_ms_1":%s,"ttft_p50_ms_n":%s,"itl_p50_ms_1":%s,"itl_p50_ms_n":%s}\n' \
    "$type" "$n" "$c" "$prompt" "$output" "$a" "$b" "$ratio" "$t1" "$tn" "$i1" "$in" >"$out/ab.json"
