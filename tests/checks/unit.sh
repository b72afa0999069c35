#!/bin/bash
# The balloon core's unit tests, under ASan and UBSan, and its lockless
# statistics under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages gcc make libc6-dev
make -C tests/unit run
