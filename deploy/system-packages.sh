#!/usr/bin/env bash
# The system packages the tests use, installed once with apt-get (Debian); .ci/run and `make system` run it.
#   chromium        headless, for the results page's browser tests (tests/service/browser.py)
#   docker-compose  Debian's 1.29, for the compose file's tests: its `config` and its copy of the Compose
#                   spec's JSON schema (tests/deploy/compose.py)
# Idempotent: what is there is left alone, and `apt-get update` runs only when something is missing. As a
# user who cannot install, it prints the command to run and exits 0: the tests that need a missing package
# then skip loudly (and fail under CI=true).
set -euo pipefail

# command -> the Debian package that provides it
declare -A PACKAGE=([chromium]=chromium [docker-compose]=docker-compose)

missing=()
for command in chromium docker-compose; do
  if command -v "$command" >/dev/null 2>&1; then
    echo "system-packages: $command is installed ($(command -v "$command"))"
  else
    missing+=("${PACKAGE[$command]}")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "system-packages: nothing to do"
  exit 0
fi

install="apt-get update && apt-get install -y ${missing[*]}"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-packages: missing ${missing[*]}; as root on Debian, run: $install"
  echo "system-packages: until then the tests that need them skip (or fail under CI=true)"
  exit 0
fi

echo "system-packages: installing ${missing[*]}"
if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; then
  echo "system-packages: installed ${missing[*]}"
else
  echo "system-packages: could not install ${missing[*]} ($install failed); the tests that need them skip (or fail under CI=true)"
fi
