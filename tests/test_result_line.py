"""tests/_result.py: a worker's RESULT line goes out in one write, newline included, after
what the worker printed before (a log line on the same pipe cannot split it)."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = """
import os, sys
writes = []
real = os.write
os.write = lambda fd, b: writes.append((fd, bytes(b))) or real(fd, b)
print("before")
from tests._result import report
report({"k": [1, "x"]})
sys.stderr.write(repr(writes))
"""


def test_the_line_is_one_write_after_earlier_output():
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, PYTHONPATH=ROOT, PYTHONUNBUFFERED="1"))
    assert p.returncode == 0, p.stderr
    line = 'RESULT {"k": [1, "x"]}\n'
    assert p.stderr == repr([(1, line.encode())])  # one os.write: the whole line
    assert p.stdout == "before\n" + line
    assert json.loads(p.stdout.splitlines()[1][len("RESULT "):]) == {"k": [1, "x"]}
