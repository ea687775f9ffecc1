"""One rank of a peer-death scenario (tests/test_peer_death.py). Rank TEST_DOOMED kills itself
(SIGKILL: no goodbye) at TEST_PHASE:

  bootstrap   in the rendezvous, connected to rank 0 but before sending its record
  connect     after the rendezvous, before its rail connections (mesh)
  collective  in the 4th striped allreduce
  vote        entering the vote that ends a striped allreduce (two rails, failover)
  readmit     when a rail the test cut and healed is being re-admitted (reconnect)
  none        nobody dies (the test stops one with SIGSTOP)

Every rank runs checked striped allreduces until an error or TEST_STOP appears; prints
RESULT {json}: error class, message, seconds from the start of the failing call, wrong."""
import os
import signal
import sys
import time

import numpy as np

import nezha
import nezha.bootstrap.env as benv
import nezha.mesh as mesh
from nezha.failover import Failover
from tests._result import report


def die(*_a, **_k):
    os.kill(os.getpid(), signal.SIGKILL)


def arm(phase):
    if phase == "bootstrap":
        benv._send_json = die
    elif phase == "connect":
        mesh.establish = die
    elif phase == "vote":
        Failover._vote = die
    elif phase == "readmit":
        mesh.Mesh.reconnect = die


PARENT = os.getppid()


def stop_now(comm):
    """TEST_STOP exists; with TEST_AGREE_STOP=1 every rank stops after the same collective
    (else a rank that sees the file first leaves the others in a collective without it)."""
    # the test is gone (killed, timed out): stop too rather than spin for the session
    seen = os.path.exists(os.environ["TEST_STOP"]) or os.getppid() != PARENT
    if os.environ.get("TEST_AGREE_STOP") != "1":
        return seen
    flag = np.array([seen], np.int32)
    comm.allreduce(flag)
    return bool(flag[0])


def main():
    rank, phase = int(os.environ["RANK"]), os.environ["TEST_PHASE"]
    doomed = int(os.environ["TEST_DOOMED"])
    if rank == doomed:
        arm(phase)
    t0 = time.monotonic()
    stage, wrong, done = "init", 0, 0
    try:
        comm = nezha.Communicator()
        stage = "run"
        n = comm.size
        base = (np.arange(300_007) % 7).astype(np.int64)
        while not stop_now(comm):
            if rank == doomed and phase == "collective" and done == 3:
                die()
            a = base + rank
            t0 = time.monotonic()
            comm.allreduce(a)
            wrong += not np.array_equal(a, base * n + n * (n - 1) // 2)
            done += 1
            if done == 3:
                open(os.path.join(os.environ["TEST_DIR"], f"ready.{rank}"), "w").close()
        events = [e["event"] for e in comm.stats()["events"]]
        comm.close()
        res = dict(rank=rank, error=None, stage=stage, wrong=wrong, done=done,
                   downs=events.count("down"), ups=events.count("up"))
    except nezha.NezhaError as exc:
        res = dict(rank=rank, error=type(exc).__name__, msg=str(exc)[:600], stage=stage,
                   secs=round(time.monotonic() - t0, 2), wrong=wrong, done=done,
                   peer=getattr(exc, "peer", None))
    report(res)


if __name__ == "__main__":
    main()
