#!/bin/sh
# apt-install.sh TARGET PACKAGE...: makes sure Debian packages a make target
# needs are installed (tests and tools may use Debian packages; the runtime
# never does).
#   all installed already   nothing printed, exit 0
#   as root                 says which packages and how much it downloads,
#                           then apt-get install -y (apt-get update first if
#                           the package lists are empty)
#   not root                one line: the packages and the command to run as
#                           root; exit 1 (apt-get itself would only say it
#                           cannot open its lock file)
# Another apt or dpkg at work (the dpkg lock held) is waited for, up to 120 s.
set -u
target=${1:?usage: apt-install.sh TARGET PACKAGE...}
shift
[ $# -gt 0 ] || { echo "usage: apt-install.sh TARGET PACKAGE..." >&2; exit 2; }

missing=
for p in "$@"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
missing=${missing# }
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "make $target: needs the Debian package(s) $missing; as root run: apt-get install -y $missing" >&2
    exit 1
fi
lock_wait="-o DPkg::Lock::Timeout=120"
# The download size, from the URIs apt would fetch (third field: bytes).
size() { apt-get -qq --print-uris install $missing 2>/dev/null | awk '{ s += $3 } END { if (NR) printf "%.0f", s / 1e6 }'; }
mb=$(size)
if [ -z "$mb" ]; then
    apt-get $lock_wait update -qq || { echo "make $target: apt-get update failed; install $missing by hand" >&2; exit 1; }
    mb=$(size)
fi
echo "make $target: installing $missing with apt-get (${mb:-?} MB to download)"
# shellcheck disable=SC2086
apt-get $lock_wait install -y -qq $missing ||
    { apt-get $lock_wait update -qq && apt-get $lock_wait install -y -qq $missing; } || # stale package lists: once more after an update
    { echo "make $target: apt-get install -y $missing failed" >&2; exit 1; }
