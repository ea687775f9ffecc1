"""Drive loop.py over systems in one lab (run from the tree under test, under flock -x):
  python exp.py OUTDIR RATES SIZE CONFIG [CONFIG ...]
CONFIG = name:backend:ifnames[:gap_us[:K=V,K=V]] e.g. nezha-rail0:nezha:rail0,
mpi-rail0:mpi:rail0:0, nezha-all:nezha:rail0,rail1:150:NEZHA_ALGO=rd.
env: EXP_ITERS (1000), EXP_SNIFF=1 (frames on host 0's rail0 and rail1, sniff.py),
EXP_TRACE (nezha calls op-traced), EXP_REPS (each config this many times, interleaved).
Writes OUTDIR/<rep>-<name>.rank<r>.json, OUTDIR/<rep>-<name>.qdisc (tc -s before/after,
host 0's rails), OUTDIR/<rep>-<name>.<rail>.frames."""
import json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../../.."))
sys.path.insert(0, ROOT)
from nezha.lab import Lab, LabSpec  # noqa: E402

outdir, rates, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
configs = sys.argv[4:]
os.makedirs(outdir, exist_ok=True)
iters = int(os.environ.get("EXP_ITERS", "1000"))
reps = int(os.environ.get("EXP_REPS", "1"))
lab = Lab(LabSpec(hosts=4, rails=2, rates=rates, name="h43x"))
lab.up(replace=True)
try:
    for rep in range(reps):
        order = configs[rep % len(configs):] + configs[:rep % len(configs)]
        for cfg in order:
            parts = cfg.split(":")
            name, backend, ifn = parts[:3]
            gap = parts[3] if len(parts) > 3 else "0"
            extra = dict(kv.split("=", 1) for kv in parts[4].split(",")) if len(parts) > 4 else {}
            base = os.path.join(outdir, f"{rep}-{name}")
            env = {"PYTHONPATH": ROOT, "LOOP_SIZE": str(size), "LOOP_ITERS": str(iters),
                   "LOOP_GAP_US": gap, "LOOP_OUT": base, "LOOP_BACKEND": backend,
                   "LOOP_TRACE": os.environ.get("EXP_TRACE", "0"), "NEZHA_SOCKET_IFNAME": ifn,
                   **extra}
            mca = (("btl_tcp_if_include", ifn),) if backend == "mpi" else ()
            q = lambda: "".join(lab.exec(0, ["tc", "-s", "qdisc", "show", "dev", f"rail{r}"]).stdout
                                for r in range(2))
            q0 = q()
            sn = []
            if os.environ.get("EXP_SNIFF"):
                for r in range(2):
                    sn.append(lab.popen(0, [sys.executable, os.path.join(HERE, "sniff.py"),
                                            f"rail{r}", f"{base}.rail{r}.frames"],
                                        env={"SNIFF_SECONDS": os.environ.get("EXP_SNIFF_S", "12")}))
                time.sleep(0.5)
            t0 = time.monotonic()
            res = lab.run([sys.executable, os.path.join(HERE, "loop.py")], np=4, env=env, mca=mca,
                          timeout=300, capture=True)
            wall = time.monotonic() - t0
            for p in sn:
                p.wait(timeout=60)
            with open(base + ".qdisc", "w") as f:
                f.write("# before\n" + q0 + "# after\n" + q())
            print(f"{rep} {name:<20} rc {res.returncode} {wall:5.1f} s", flush=True)
            if res.returncode:
                print(res.stdout[-2000:], res.stderr[-3000:])
finally:
    lab.down()
