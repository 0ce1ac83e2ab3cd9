#!/bin/bash
# run.sh: N chat-servers on loopback and HAProxy in front of them, in the
# foreground until Ctrl-C (or SIGTERM), which stops everything it started.
# What `make replicas` runs; tests/replicas and `make bench-replicas` too.
#
#   run.sh [--balance prefix|roundrobin] [--port P] [--dir D] SERVER MODEL N [SERVER_ARGS...]
#
# Each replica binds a free port (--bind 127.0.0.1:0) and says which on its
# log; the balancer's config is tools/replicas/haproxy.cfg with its example
# server lines replaced by these replicas (and, with --balance roundrobin,
# its prefix hash by round robin: the comparison the book measures). Prints
# one line per replica ("replica NAME URL pid PID") and then the balancer's
# URL ("balancer URL"); logs and the config go to D (default build/replicas).
set -u
here=$(cd "$(dirname "$0")" && pwd)
balance=prefix port=8000 dir=build/replicas
while [ $# -gt 0 ]; do
    case $1 in
    --balance) balance=${2:?--balance needs prefix or roundrobin}; shift 2 ;;
    --port) port=${2:?--port needs a number}; shift 2 ;;
    --dir) dir=${2:?--dir needs a directory}; shift 2 ;;
    -*) echo "run.sh: unknown option '$1'" >&2; exit 2 ;;
    *) break ;;
    esac
done
if [ $# -lt 3 ]; then
    echo "usage: run.sh [--balance prefix|roundrobin] [--port P] [--dir D] SERVER MODEL N [SERVER_ARGS...]" >&2
    exit 2
fi
server=$1 model=$2 n=$3
shift 3
case $balance in prefix|roundrobin) ;; *) echo "run.sh: --balance is prefix or roundrobin, not '$balance'" >&2; exit 2 ;; esac
case $n in ''|*[!0-9]*|0) echo "run.sh: N must be a number of replicas from 1, not '$n'" >&2; exit 2 ;; esac
case $port in ''|*[!0-9]*) echo "run.sh: --port must be a number, not '$port'" >&2; exit 2 ;; esac
[ -x "$server" ] || { echo "run.sh: no chat-server at $server (make it first)" >&2; exit 2; }
[ -r "$model" ] || { echo "run.sh: cannot read the model $model" >&2; exit 2; }
# Debian puts it in /usr/sbin, which is not on a user's PATH.
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$haproxy" ] || { echo "run.sh: haproxy is not installed (make replicas-deps installs it)" >&2; exit 2; }
mkdir -p "$dir" || exit 2

pids=()
stop() {
    trap - INT TERM EXIT
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
    wait 2>/dev/null
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

# The replicas share the machine's cores: each gets its share of threads
# unless SERVER_ARGS says how many.
threads=()
case " $* " in *" --threads "*) ;; *) t=$(( $(nproc) / n )); threads=(--threads $(( t > 0 ? t : 1 ))) ;; esac

servers=
for i in $(seq 1 "$n"); do
    log=$dir/replica$i.log
    "$server" --bind 127.0.0.1:0 "${threads[@]}" "$@" "$model" 2>"$log" &
    pids+=($!)
    url=
    for _ in $(seq 1 1200); do # up to 120 s to load the model
        url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log" | head -1)
        [ -n "$url" ] && break
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$url" ]; then
        echo "run.sh: replica $i did not start; its log ($log) says:" >&2
        tail -5 "$log" >&2
        exit 1
    fi
    echo "replica replica$i $url pid ${pids[-1]}"
    servers="$servers    server replica$i ${url#http://}\n"
done

# The config: the repository's, with these servers (and the chosen balance).
cfg=$dir/haproxy.cfg
awk -v servers="$servers" -v rr=$([ "$balance" = roundrobin ] && echo 1 || echo 0) '
    /# servers: begin/ { print; printf "%s", servers; skip = 1; next }
    /# servers: end/   { skip = 0 }
    skip               { next }
    rr && /^ *balance hash/ { print "    balance roundrobin"; next }
    { print }' "$here/haproxy.cfg" | sed 's/\\n/\n/g' >"$cfg"
LB_BIND=127.0.0.1:$port "$haproxy" -c -q -f "$cfg" || { echo "run.sh: haproxy rejects $cfg" >&2; exit 1; }
LB_BIND=127.0.0.1:$port "$haproxy" -db -f "$cfg" 2>"$dir/haproxy.log" &
pids+=($!)
for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
        echo "run.sh: haproxy did not start; $dir/haproxy.log says:" >&2
        tail -5 "$dir/haproxy.log" >&2
        exit 1
    fi
    sleep 0.1
done
echo "balancer http://127.0.0.1:$port ($balance; HAProxy's page: http://127.0.0.1:$port/haproxy; log: $dir/haproxy.log)"
echo "Ctrl-C stops the balancer and the $n replicas"
# Until a signal, or until the balancer exits on its own.
wait "${pids[-1]}"
echo "run.sh: haproxy exited; its log ($dir/haproxy.log) says:" >&2
tail -5 "$dir/haproxy.log" >&2
exit 1
