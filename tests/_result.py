"""The one way a worker reports to its test: a line "RESULT {json}" on stdout, which the
parent picks out of the output (tests/spawn.py and the tests' own parsers)."""
import json
import os
import sys


def report(doc):
    """Print RESULT and doc as JSON in one write of the whole line, newline included.
    print() writes the text and its newline apart (and with PYTHONUNBUFFERED each goes out
    at once): a nezha log line on stderr, often the same pipe, landed between them in CI and
    the parent's JSON parse failed."""
    line = ("RESULT " + json.dumps(doc) + "\n").encode()
    sys.stdout.flush()  # what the worker printed before comes first
    fd = sys.stdout.fileno()
    while line:
        line = line[os.write(fd, line):]
