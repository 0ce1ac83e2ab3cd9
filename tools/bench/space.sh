#!/bin/sh
# space.sh MKMODEL DIR TYPES...: before `make bench` makes its models, says how
# much disk they take and checks it is free. The models are Qwen3-0.6B-shaped
# (mkmodel --preset qwen3-0.6b), one per type, kept in DIR between runs.
# Exits 1, naming the sizes, when the missing ones do not fit.
set -u
mkmodel=${1:?usage: space.sh MKMODEL DIR TYPES...}
dir=${2:?usage: space.sh MKMODEL DIR TYPES...}
shift 2

gb() { awk -v b="$1" 'BEGIN { printf "%.1f GB", b / 1e9 }'; }

need=0 have=0 sizes=
for t in "$@"; do
    n=$("$mkmodel" --preset qwen3-0.6b --type "$t" --print-size) || exit 1
    sizes="$sizes $t $(gb "$n"),"
    if [ -f "$dir/qwen3-0.6b-$t.gguf" ]; then have=$((have + n)); else need=$((need + n)); fi
done
sizes=${sizes%,}
mkdir -p "$dir" || exit 1
free=$(df -Pk "$dir" | awk 'NR == 2 { printf "%.0f", $4 * 1024 }')
echo "make bench: models in $dir:$sizes; $(gb "$have") there, $(gb "$need") to make, $(gb "$free") free"
if [ "$need" -gt 0 ] && [ "$need" -gt $((free - 200000000)) ]; then
    echo "make bench: not enough disk space for the models: free some, or bench fewer types" \
         "(BENCH_TYPES=q4_0 needs $(gb "$("$mkmodel" --preset qwen3-0.6b --type q4_0 --print-size)"))" >&2
    exit 1
fi
