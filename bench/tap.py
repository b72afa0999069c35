"""bench/tap.py - checks collected, then printed as TAP with the closing
`N passed, N failed` line; the self-test and bench-short share it."""

import sys


class Checks:
    def __init__(self):
        self.results = []

    def __call__(self, ok, what):
        self.results.append((bool(ok), what))

    def finish(self):
        """Print the plan, a line per check and the summary; exit 1 if any failed."""
        print(f"1..{len(self.results)}")
        for i, (ok, what) in enumerate(self.results, 1):
            print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        failed = sum(not ok for ok, _ in self.results)
        print(f"{len(self.results) - failed} passed, {failed} failed")
        sys.exit(1 if failed else 0)
