#!/usr/bin/env bash
# Install into .venv and run every test. pytest's exit 5 (no tests collected) is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi
exit "$rc"
