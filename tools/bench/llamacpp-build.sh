#!/bin/sh
# llamacpp-build.sh PACKAGE DIR: builds llama.cpp's llama-bench,
# llama-batched-bench and llama-server under DIR (DIR/cmake/bin), the
# yardstick of `make bench-llamacpp` and `make bench-serve`, from the llama.cpp source the npm package PACKAGE
# (node-llama-cpp@VERSION) ships as llama/gitRelease.bundle:
#   DIR/PACKAGE.tgz   npm pack (the only step that uses the network)
#   DIR/package/      the bundle and llama.cpp.info.json (its tag), from the tarball
#   DIR/src/          git clone of the bundle
#   DIR/cmake/        CPU only, -march=native, Release, static, no HTTPS/curl;
#                     only the three targets, with -j2; without AMX where the
#                     CPU says it has AMX but a tile instruction fails (some
#                     virtual machines): llama.cpp would die on its first matmul
# Each step is skipped when its output is there; DIR/source.txt names what was built.
set -eu
pkg=${1:?usage: llamacpp-build.sh PACKAGE DIR}
dir=${2:?usage: llamacpp-build.sh PACKAGE DIR}
bundle=package/llama/gitRelease.bundle
info=package/llama/llama.cpp.info.json
say() { echo "make bench-llamacpp: $*"; }
fail() { echo "make bench-llamacpp: $*" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"

if [ ! -f src/CMakeLists.txt ]; then
    tgz=$(ls node-llama-cpp-*.tgz 2>/dev/null | head -n 1)
    if [ -z "$tgz" ]; then
        say "npm pack $pkg (about 36 MB)"
        npm pack --silent "$pkg" >/dev/null || fail "npm pack $pkg failed: the npm registry cannot be reached, or has no $pkg"
        tgz=$(ls node-llama-cpp-*.tgz 2>/dev/null | head -n 1)
        [ -n "$tgz" ] || fail "npm pack $pkg wrote no node-llama-cpp-*.tgz in $dir"
    fi
    tar tzf "$tgz" | grep -qx "$bundle" || fail "$dir/$tgz has no $bundle: this version of $pkg does not ship llama.cpp's source"
    tar xzf "$tgz" "$bundle" "$info"
    rm -rf src
    git clone -q "$bundle" src 2>/dev/null || fail "git clone $dir/$bundle failed"
fi

tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$info" 2>/dev/null)
echo "${tag:-?} (npm $pkg, llama/gitRelease.bundle, commit $(git -C src rev-parse --short HEAD))" > source.txt

# A build directory moved from elsewhere (a copied checkout) still names its
# old path, and cmake refuses it: keep its benchmarks if both are there (they
# are static), else start the build over here.
made_in=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' cmake/CMakeCache.txt 2>/dev/null || true)
moved=
if [ -n "$made_in" ] && [ "$made_in" != "$(pwd)/cmake" ]; then
    if [ -x cmake/bin/llama-bench ] && [ -x cmake/bin/llama-batched-bench ] && [ -x cmake/bin/llama-server ]; then
        moved=1
    else
        say "$dir/cmake was configured in $made_in: configuring again here"
        rm -rf cmake
    fi
fi

# -march=native turns on AMX where the CPU says it has it; a tiny program
# asks Linux for the tile state and runs one tile instruction. If it cannot
# (no compiler support, or the instruction faults), AMX stays off. With
# GCC 12 the probe faults even where the tiles work: the compiler drops part
# of the configuration's zeroing before ldtilecfg, as if the instruction read
# fewer than its 64 bytes. llama.cpp built with AMX by the same compiler
# died there too, with SIGSEGV at ldtilecfg in its first matmul (2026-12-07,
# on a Xeon where this project's AMX kernel runs): AMX off is the llama.cpp
# that runs.
amx_works() {
    cat > amx-probe.c <<'PROBE'
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <immintrin.h>
__attribute__((target("amx-tile"))) static void tile(void) {
    unsigned char cfg[64];
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;
    for (int i = 0; i < 8; i++) cfg[16 + 2 * i] = 64, cfg[48 + i] = 16;
    _tile_loadconfig(cfg);
    _tile_zero(0);
    _tile_release();
}
int main(void) {
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return 1; /* ARCH_REQ_XCOMP_PERM, XTILEDATA */
    tile();
    return 0;
}
PROBE
    cc -O1 -o amx-probe amx-probe.c 2>/dev/null && ./amx-probe 2>/dev/null
}
flags=
if cc -march=native -dM -E - </dev/null 2>/dev/null | grep -q __AMX_TILE__ && ! (amx_works) 2>/dev/null; then
    flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    say "this CPU says it has AMX but a tile instruction built by this compiler fails here: llama.cpp is built without AMX"
fi
rm -f amx-probe amx-probe.c

# A build configured before llama-server was one of the targets, or with
# other flags: configure again.
if [ -f cmake/CMakeCache.txt ] && [ -z "$moved" ] && { ! grep -q '^LLAMA_BUILD_SERVER:BOOL=ON' cmake/CMakeCache.txt ||
    ! grep -qx "CMAKE_CXX_FLAGS:STRING=$flags" cmake/CMakeCache.txt; }; then
    rm -f cmake/CMakeCache.txt
fi
if [ ! -f cmake/CMakeCache.txt ]; then
    say "configuring llama.cpp $(cat source.txt) in $dir/cmake"
    cmake -S src -B cmake -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
        -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DGGML_CCACHE=OFF -Wno-dev >cmake.log 2>&1 ||
        { tail -n 20 cmake.log >&2; fail "cmake could not configure llama.cpp (all of it in $dir/cmake.log)"; }
fi
if [ ! -x cmake/bin/llama-bench ] || [ ! -x cmake/bin/llama-batched-bench ] || [ ! -x cmake/bin/llama-server ]; then
    say "building llama-bench, llama-batched-bench and llama-server (minutes on 2 cores; log in $dir/build.log)"
fi
if [ -n "$moved" ]; then
    say "$dir/cmake was configured in $made_in: using its benchmarks and server as they are"
else
    cmake --build cmake --config Release -j2 --target llama-bench llama-batched-bench llama-server >build.log 2>&1 ||
        { tail -n 20 build.log >&2; fail "building llama.cpp failed (all of it in $dir/build.log)"; }
fi
