#!/bin/bash
# Build the .deb and run lintian on it: any error or warning fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages lintian
rm -rf build/deb
make deb
echo "--- lintian $(lintian --version)"
lintian --fail-on error,warning --display-info --show-overrides build/deb/*.changes
echo "--- lintian: no error, no warning"
