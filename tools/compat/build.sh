#!/usr/bin/env bash
# Builds librdkafka and its test programs (tests/test-runner) from the source tree the npm package
# @confluentinc/kafka-javascript ships, once per version, in $INSYNC_COMPAT_CACHE (default ~/.cache/insync-compat)
# /<version>. Prints the tests directory. Idempotent: a finished build of the same recipe (BUILD_ID) is reused.
set -euo pipefail
VERSION="${1:?usage: build.sh <@confluentinc/kafka-javascript version>}"
CACHE="${INSYNC_COMPAT_CACHE:-$HOME/.cache/insync-compat}/$VERSION"
TREE="$CACHE/package/deps/librdkafka"
# SSL, SASL/GSSAPI and curl are off: insync has only PLAINTEXT listeners (the allowlist excludes the tests that
# need the others). Unoptimised, it builds in 40% of the time and the suite, which waits on the broker, runs as long.
CONFIGURE_FLAGS="--disable-ssl --disable-gssapi --disable-curl --disable-optimization"
# Changes with the recipe, so a cached build made the old way is rebuilt.
BUILD_ID="$VERSION $CONFIGURE_FLAGS rapidjson"
if [ -x "$TREE/tests/test-runner" ] && [ "$(cat "$CACHE/.built" 2>/dev/null)" = "$BUILD_ID" ]; then
    echo "$TREE/tests"
    exit 0
fi
missing=""
command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
command -v make >/dev/null 2>&1 || missing="$missing make"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
# rapidjson: the tests that check statistics JSON (0053, 0101, 0110) skip themselves without it.
for pkg in zlib1g-dev libzstd-dev liblz4-dev rapidjson-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    echo "installing with apt:$missing (to build librdkafka's test suite)" >&2
    apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >&2
fi
rm -rf "$CACHE" && mkdir -p "$CACHE"
(cd "$CACHE" && npm pack --silent "@confluentinc/kafka-javascript@$VERSION" >&2 \
    && tar xzf confluentinc-kafka-javascript-*.tgz package/deps/librdkafka && rm -f confluentinc-kafka-javascript-*.tgz)
cd "$TREE"
# The machine has two cores shared with benchmarks: build at low priority.
nice -n 15 ./configure $CONFIGURE_FLAGS >&2
nice -n 15 make -j2 libs >&2
nice -n 15 make -j2 -C tests build >&2
echo "$BUILD_ID" > "$CACHE/.built"
echo "$TREE/tests"
