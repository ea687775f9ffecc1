"""One rank of a failover scenario (tests/test_failover.py): runs collectives, checks every
result against numpy, and stops when the stop file appears; prints RESULT {json} on exit.
With TEST_INJECT_DIR, the ranks pause when the driver asks (_pause) so that its fault
catches a small allreduce in flight."""
import faulthandler
import json
import os
import signal
import sys
import time

import numpy as np

import nezha
from tests._result import report
from tests._tree import force_tree


# with no elements too: such a collective moves only headers (it votes; the soak found it
# let ranks run a collective ahead of one still stuck)
SMALL = [(1, np.int64), (7, np.float32), (1000, np.int32), (4099, np.float64), (3001, np.int64),
         (0, np.int32)]


def small(comm, i):
    """Small collectives (lazy: they return without a vote): allreduce in place or not with
    several ops, allgather, reduce_scatter, alltoall, barrier, broadcast, reduce, and (one
    call in ten) allreduce, broadcast, allgather, reduce_scatter and alltoall on the same
    buffers again (the fast path); returns how many came out wrong. Inputs are
    overwritten after each call: the caller owns them again, so a re-run must use what was
    kept."""
    r, n, count, dt, base, a, want = _inputs(comm, i)
    v = i % 10
    if v == 0:
        comm.allreduce(a)
        return int(not np.array_equal(a, want))
    out = np.full(count, -1, dt)
    if v == 1:
        comm.allreduce(a, out, op=nezha.MAX)
        return int(not np.array_equal(out, (base + n - 1).astype(dt)))
    # AVG on floats every other round: a re-run lazy collective must divide too (the soak's
    # root of a small AVG reduce once got the sum); n = 4 here, so want / n is exact
    avg = np.dtype(dt).kind == "f" and (i // 10) % 2 == 1
    op, res = (nezha.AVG, (want / n).astype(dt)) if avg else (nezha.SUM, want)
    if v == 2:
        comm.allreduce(a, out, op=op)
        a[:] = -5
        return int(not np.array_equal(out, res))
    if v == 3:
        out = np.full(count * n, -1, dt)
        comm.allgather(a, out)
        a[:] = -5
        return int(not np.array_equal(out, np.concatenate([(base + k).astype(dt)
                                                            for k in range(n)])))
    if v == 4:
        send = np.tile(a, n)
        comm.reduce_scatter(send, out)
        send[:] = -5
        return int(not np.array_equal(out, want))
    if v == 5:
        send = np.concatenate([a + j for j in range(n)])
        out = np.full(count * n, -1, dt)
        comm.alltoall(send, out)
        send[:] = -5
        return int(not np.array_equal(out, np.concatenate([(base + k + r).astype(dt)
                                                            for k in range(n)])))
    if v == 6:
        comm.barrier()
        return 0
    if v == 8:  # small broadcast and reduce: allreduces underneath, lazy too
        b = a.copy() if r == i % n else np.full(count, -1, dt)
        comm.broadcast(b, root=i % n)
        a[:] = -5
        return int(not np.array_equal(b, (base + i % n).astype(dt)))
    if v == 9:
        comm.reduce(a, out, root=i % n, op=op)
        a[:] = -5
        return int(r == i % n and not np.array_equal(out, res))
    return kept(comm, i)


# bytes of the small broadcasts (bcasts): one, odd, the 4 B-16 KiB boundaries
BCAST = [1, 4, 13, 1021, 4096, 8191, 16384]
# the lazy hierarchical ones (_caught "hbcast"): odd, 16 KiB, the largest lazy one
HBCAST = [65539, 1021, 16384, 256 << 10]


def bcasts(comm, i, size=None):
    """Three small broadcasts in a row, the root turning (a lazy tree, the allreduce that
    follows one, a tree), one call in three on kept buffers (the fast path); the root's
    buffer is overwritten after each call (a re-run must send the copy kept). Returns how
    many came out wrong."""
    r, n = comm.rank, comm.size
    nbytes = BCAST[(size if size is not None else i) % len(BCAST)]
    wrong = 0
    for j in range(3):
        root = (i + j) % n
        want = ((np.arange(nbytes) * 13 + i + 5 * j) % 251 + 1).astype(np.uint8)
        b = (_KEPT.setdefault(("bcast", nbytes, j), np.empty(nbytes, np.uint8)) if i % 3 == 0
             else np.empty(nbytes, np.uint8))
        b[:] = want if r == root else 0
        comm.broadcast(b, root=root)
        wrong += not np.array_equal(b, want)
        b[:] = 0
    return int(wrong)


def _inputs(comm, i):
    """(rank, size, count, dtype, base, this rank's input, the sum) of call i."""
    r, n = comm.rank, comm.size
    count, dt = SMALL[i % len(SMALL)]
    base = (np.arange(count) * 7 + i) % 11
    want = sum((base + k).astype(dt) for k in range(n))
    return r, n, count, dt, base, (base + r).astype(dt), want


def kept(comm, i):
    """The same buffers every time (the fast path, fastpath.pxi), refilled per call: an
    allreduce, a broadcast (the root turning), an allgather, a reduce_scatter, an alltoall;
    returns how many came out wrong."""
    r, n, count, dt, base, a, want = _inputs(comm, i)
    x, y, big, out = _KEPT.setdefault((count, np.dtype(dt).str), tuple(
        np.empty(k, dt) for k in (count, count, count * n, count * n)))
    x[:] = a
    comm.allreduce(x, y)
    x[:] = -5
    wrong = not np.array_equal(y, want)
    root = (i // 10) % n
    x[:] = (base + root).astype(dt) if r == root else -1
    comm.broadcast(x, root=root)
    wrong += not np.array_equal(x, (base + root).astype(dt))
    x[:] = a
    comm.allgather(x, big)
    x[:] = -5
    wrong += not np.array_equal(big, np.concatenate([(base + k).astype(dt) for k in range(n)]))
    big[:] = np.tile(a, n)
    comm.reduce_scatter(big, y)
    big[:] = -5
    wrong += not np.array_equal(y, want)
    big[:] = np.concatenate([a + j for j in range(n)])
    comm.alltoall(big, out)
    big[:] = -5
    wrong += not np.array_equal(out, np.concatenate([(base + k + r).astype(dt)
                                                     for k in range(n)]))
    return int(wrong)


def queued(comm, i):
    """Four in-place iallreduces queued at once (their failover snapshots taken when posted,
    executor._presnap), the fourth on the first one's buffer (it runs out of place,
    executor._out_of_place); returns how many came out wrong."""
    r, n = comm.rank, comm.size
    count = 100_003 + i % 3  # int64: ~800 KiB, above the lazy limit: each one votes
    base = (np.arange(count) * 3 + i) % 7
    bufs = [(base + k + r).astype(np.int64) for k in range(3)]
    reqs = [comm.iallreduce(b) for b in bufs] + [comm.iallreduce(bufs[0])]
    for q in reqs:
        q.wait(120)
    want = [base * n + n * k + n * (n - 1) // 2 for k in range(3)]
    want[0] = want[0] * n
    return sum(int(not np.array_equal(b, w)) for b, w in zip(bufs, want))


_KEPT = {}
WAIT_S = 60  # the driver answers within seconds; a lost driver must not hang the ranks


def _wait_file(path, stop):
    """Wait for path to appear; False if the stop file came first."""
    t_end = time.monotonic() + WAIT_S
    while not os.path.exists(path):
        if os.path.exists(stop):
            return False
        if time.monotonic() > t_end:
            raise RuntimeError(f"no {path} within {WAIT_S} s")
        time.sleep(0.01)
    return True


def _pause(comm, d, k, stop):
    """Pause k, asked for by the driver (file arm.k, seen by some rank; every rank pauses at
    the same collective): with every rail back in use, rank 0 writes the plan of the small
    allreduce all will run next (ready.k), each rank writes paused.k.rank, then all wait for
    go.k; the driver cuts a rail of that plan meanwhile, so the fault catches that allreduce
    in flight, whatever the timing.
    Returns how many results came out wrong."""
    r, n = comm.rank, comm.size
    a = np.zeros(5, np.int64)
    wrong = 0
    for _ in range(500):  # the last cut rail must be re-admitted first (else none is left)
        a[:] = np.arange(5) + r
        comm.allreduce(a)
        wrong += not np.array_equal(a, np.arange(5) * n + n * (n - 1) // 2)
        ok = np.array([all(comm.stats()["alive"].values())], np.int64)
        comm.allreduce(ok, op=nezha.MIN)  # agreed: every rank pauses after as many
        if ok[0]:
            break
        time.sleep(0.01)
    else:
        raise RuntimeError(f"pause {k}: a rail was not re-admitted")
    # each rank says it is through that allreduce (lazy: rank 0 returns from it before the
    # others finish it; a fault set then caught it instead of the next, session 21)
    open(os.path.join(d, f"paused.{k}.{r}"), "w").close()
    if r == 0:
        with open(os.path.join(d, f"ready.{k}.tmp"), "w") as f:
            f.write(comm.stats()["last_plan"])
        os.rename(os.path.join(d, f"ready.{k}.tmp"), os.path.join(d, f"ready.{k}"))
    if not _wait_file(os.path.join(d, f"go.{k}"), stop):
        return wrong
    mix = ("allgather", "reduce_scatter", "avg", "sum")
    kind = os.environ.get("TEST_PAUSE_CAUGHT") or (
        mix[k % 4] if os.environ.get("TEST_PAUSE_MIX") else "sum")
    return wrong + _caught(comm, kind, k)


def _caught(comm, kind, k=0):
    """The collective the fault catches: an allreduce of 5 int64 (sum); with
    TEST_PAUSE_MIX, in turn an allgather, a reduce_scatter and an AVG allreduce of float64
    too; with TEST_PAUSE_CAUGHT=bcast, an allreduce then two small broadcasts (a lazy tree,
    whose root returns at once, and the allreduce that follows one) and an allreduce; with
    hbcast, broadcasts of HBCAST bytes first (lazy hier ones under NEZHA_ALGO=hier), the
    root turning and zeroing its buffer after each, then an allreduce.
    Returns 1 if it came out wrong."""
    r, n = comm.rank, comm.size
    x = np.arange(5) * (r + 1)
    total = np.arange(5) * (n * (n + 1) // 2)
    if kind == "bcast":
        comm.allreduce(x)
        wrong = not np.array_equal(x, total)
        wrong += bcasts(comm, k, 1000 + k)
        x = np.arange(5) * (r + 1)
        comm.allreduce(x)
        return int(wrong + (not np.array_equal(x, total)))
    if kind == "hbcast":  # NEZHA_ALGO=hier: lazy hierarchical broadcasts, caught first
        wrong = 0
        for j, nbytes in enumerate(HBCAST):
            root = (k + j) % n
            want = ((np.arange(nbytes) * 13 + k + 5 * j) % 251 + 1).astype(np.uint8)
            b = want.copy() if r == root else np.zeros(nbytes, np.uint8)
            comm.broadcast(b, root=root)
            wrong += not np.array_equal(b, want)
            b[:] = 0  # the root's too: a re-run for a rank behind must send the copy kept
        comm.allreduce(x)
        return int(wrong + (not np.array_equal(x, total)))
    if kind == "avg":  # a re-run slice divides once (in its re-run), the rest once too
        a = x.astype(np.float64)
        comm.allreduce(a, op=nezha.AVG)
        return int(not np.array_equal(a, total / n))
    if kind == "allgather":
        out = np.full(5 * n, -1, np.int64)
        comm.allgather(x, out)
        return int(not np.array_equal(out, np.concatenate([np.arange(5) * (p + 1)
                                                           for p in range(n)])))
    if kind == "reduce_scatter":
        out = np.full(5, -1, np.int64)
        comm.reduce_scatter(np.tile(x, n), out)
        return int(not np.array_equal(out, total))
    comm.allreduce(x)
    return int(not np.array_equal(x, total))


def _status(comm, done, last):
    """Every 50 ms, this rank's view for the test to wait on (tests/test_loop_faults.py
    _wait): collectives done, down and up events, whether every channel is alive. Written
    whole (rename), read while the ranks run; returns the time of the last write."""
    now = time.monotonic()
    if now - last < 0.05:
        return last
    st = comm.stats()
    doc = dict(done=done, down=sum(e["event"] == "down" for e in st["events"]),
               up=sum(e["event"] == "up" for e in st["events"]), alive=all(st["alive"].values()))
    path = os.path.join(os.environ["TEST_READY_DIR"], f"status.{comm.rank}")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)
    return now


def main(stop, kind):
    comm = nezha.Communicator()
    force_tree(comm)  # TEST_TREE (tests/_tree.py)
    r, n = comm.rank, comm.size
    wrong = done = 0
    count = 300_007  # odd, prime: slices and pieces that do not divide evenly
    base = (np.arange(count) % 5).astype(np.int64)
    inject = os.environ.get("TEST_INJECT_DIR")
    paused = 0
    last = 0.0
    try:
        while True:
            # [stop, pause]: a file seen by any rank counts for all
            arm = inject is not None and os.path.exists(os.path.join(inject, f"arm.{paused}"))
            flag = np.array([os.path.exists(stop), arm], np.int64)
            comm.allreduce(flag, op=nezha.MAX)
            if flag[0]:
                break
            if flag[1]:
                wrong += _pause(comm, inject, paused, stop)
                paused += 1
            which = done % 4 if kind == "all" else 0
            if kind == "small":
                wrong += small(comm, done)
            elif kind == "kept":
                wrong += kept(comm, done)
            elif kind == "bcast":
                # and an allgather: striped (NEZHA_MIN_RAIL_PIECE=16), it meets a cut of
                # either rail (the broadcasts run whole on one)
                wrong += bcasts(comm, done) + _caught(comm, "allgather")
            elif kind == "queued":
                wrong += queued(comm, done)
            elif which == 0:
                a = base + r
                comm.allreduce(a)
                wrong += not np.array_equal(a, base * n + n * (n - 1) // 2)
            elif which == 1:
                b = base * 3 if r == 1 else np.zeros(count, np.int64)
                comm.broadcast(b, root=1)
                wrong += not np.array_equal(b, base * 3)
            elif which == 2:
                out = np.zeros(count * n, np.int64)
                comm.allgather(base + r, out)
                wrong += not np.array_equal(out, np.concatenate([base + k for k in range(n)]))
            else:
                c = count - count % n
                send = np.tile(base[: c // n], n) + r
                out = np.zeros(c // n, np.int64)
                comm.reduce_scatter(send, out)
                wrong += not np.array_equal(out, base[: c // n] * n + n * (n - 1) // 2)
            done += 1
            if done == 5 and os.environ.get("TEST_READY_DIR"):  # the test injects from now on
                open(os.path.join(os.environ["TEST_READY_DIR"], f"ready.{r}"), "w").close()
            if done >= 5 and os.environ.get("TEST_READY_DIR"):
                last = _status(comm, done, last)
        st = comm.stats()
        report(dict(error=None, wrong=wrong, done=done, events=st["events"],
                    alive=st["alive"], fast=st["fast_path_calls"], votes=st["votes"],
                    snaps=[st["snapshots"][k] for k in ("at_post", "at_run", "out_of_place")]
                    if "snapshots" in st else None))
    except nezha.NezhaError as exc:
        if os.environ.get("TEST_DEBUG"):
            print("ENDPOINTS", comm._engine.endpoint_bytes(), comm._engine.endpoint_kinds(),
                  flush=True)
        report(dict(error=type(exc).__name__, msg=str(exc), wrong=wrong, done=done,
                    t=time.time()))
    comm.close()


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)  # a test that times out asks where each rank is
    main(sys.argv[1], sys.argv[2])
