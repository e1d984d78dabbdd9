#!/usr/bin/env bash
# System packages the project's tests use but pip cannot provide. Idempotent: a package that
# is already installed costs nothing, and `apt-get update` runs at most once per call.
#
#   docker-compose  Debian's 1.29 Python implementation; validates docker-compose.yml with
#                   `config -q` without a Docker engine (the compose v2 plugin needs none
#                   either, but is not packaged in Debian).
#   g++             compiles llama.cpp when pip builds llama-cpp-python from its sdist (the
#                   `local` provider; cmake itself comes from PyPI as a build dependency).
#   chromium        headless browser for `eval-pipeline ui-check` and its test (the Dagster
#                   UI opened for real: asset graph and scored_run pages, screenshots).
#
# Add a package by appending "deb-package:command-it-provides" to PACKAGES. Not root, or no
# apt-get: print what is missing and exit 0, so `make install` still works elsewhere; the tests
# that need a missing tool skip and say why.
set -euo pipefail

PACKAGES=(
  "docker-compose:docker-compose"
  "chromium:chromium"
  "g++:g++"
)

missing=()
for entry in "${PACKAGES[@]}"; do
  pkg=${entry%%:*}
  cmd=${entry#*:}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: not installing ${missing[*]} (needs root and apt-get);" \
    "install them yourself or the tests that use them will skip." >&2
  exit 0
fi

echo "install-system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
