"""Resource hygiene, long mode (issue 18): 1 000 communicator create/close cycles (two ranks
in this process over two loop rails and shared memory), with a mismatch every 10th, a peer
dying mid-collective every 10th and two SIGKILLed rank processes; prints fds, threads, tasks,
/dev/shm names and RSS before and after, and RSS every 20 cycles (tests/test_hygiene.py).

    python bench/hygiene.py [CYCLES] [--json out.jsonl]
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.test_hygiene import cycles  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1000
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    with tempfile.TemporaryDirectory() as d:
        before, after, outcomes = cycles(n, d, out)
    for k in ("fds", "threads", "tasks", "shm", "rss_kib"):
        print(f"{k:8s} before {before[k]:>8}  after {after[k]:>8}")
    leaked = any(after[k] != before[k] for k in ("fds", "threads", "tasks", "shm"))
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())
