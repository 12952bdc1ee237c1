#!/bin/sh
# tests/python_venv.sh PACKAGE==VERSION...: the Python of build/venv (git-ignored), on stdout.
# build/venv is a virtual environment of /usr/bin/python3 that keeps Debian's packages (torch,
# torchvision, numpy, PIL: python3 -m venv --system-site-packages), made the first time and reused
# after; each PACKAGE at its VERSION is installed into it from the Python registry (pip) when it is
# not there yet. The tests that need what Debian does not package call it:
#   python=$(sh tests/python_venv.sh safetensors==0.8.0) || exit $?
# Exit 0; or 77 (the suite's "skipped") with one line on stderr saying why: no python3-venv, or the
# registry cannot be reached (pip waits 20 s, tries twice). $MASKPRIOR_VENV moves the environment.
cd "$(dirname "$0")/.." || exit 1
venv=${MASKPRIOR_VENV:-build/venv}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -x "$venv/bin/python" ]; then
    if ! /usr/bin/python3 -m venv --system-site-packages "$venv" >"$log" 2>&1; then
        rm -rf "$venv"
        echo "skipped: /usr/bin/python3 -m venv failed (no python3-venv? apt-get install python3-venv):" \
            "$(tail -1 "$log")" >&2
        exit 77
    fi
fi
missing=""
for requirement in "$@"; do  # NAME==VERSION; installed at that version already?
    name=${requirement%%==*}
    have=$("$venv/bin/python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')
    [ "$name==$have" = "$requirement" ] || missing="$missing $requirement"
done
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    if ! "$venv/bin/python" -m pip install --quiet --timeout 20 --retries 1 $missing >"$log" 2>&1; then
        echo "skipped: pip could not install$missing into $venv (no network to the Python registry?):" \
            "$(grep -v '^ *$' "$log" | tail -1)" >&2
        exit 77
    fi
fi
echo "$(cd "$venv" && pwd)/bin/python"
