#!/bin/sh
# Installs the Debian packages that the build, the tests and the benchmark need, when they
# are missing: make run, make test and make bench call this first. As root it runs apt-get;
# otherwise sudo; where neither works it says what to install and stops.
set -e
needed="doctest-dev nlohmann-json3-dev libstb-dev python3-torch python3-numpy python3-matplotlib libopenblas0-pthread
libboost-context-dev zlib1g-dev dataset-fashion-mnist python3-sentencepiece clang libclang-rt-14-dev"
missing=""
for pkg in $needed; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "maskprior: error: missing packages:$missing, and no apt-get to install them (a Debian machine" \
        "is expected)" >&2
    exit 1
fi
echo "maskprior: installing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "maskprior: error: need root or passwordless sudo to install:$missing (apt-get install$missing)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "maskprior: installed$missing"
