"""`nezha info`: versions, build, every NEZHA_* setting with its source, interfaces and rails."""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys

import nezha
from nezha import config
from nezha.errors import InvalidUsageError


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _build() -> dict:
    try:
        importlib.import_module("nezha._core.engine")
        importlib.import_module("nezha._core.reduce")
    except Exception as e:   # ImportError, or anything a broken extension raises
        return {"kind": "not built", "error": f"{type(e).__name__}: {e}"}
    return {"kind": "compiled", "error": None}


def _mpi() -> dict | None:
    if importlib.util.find_spec("mpi4py") is None:
        return None
    try:
        import mpi4py
        mpi4py.rc.initialize = mpi4py.rc.finalize = False   # versions only: do not start MPI
        from mpi4py import MPI
        # First line up to the build details: "Open MPI v5.0.11", "MPICH Version: 4.2.0".
        library = MPI.Get_library_version().strip("\0 \n").splitlines()[0].split(", ")[0]
        return {"mpi4py": mpi4py.__version__, "library": library,
                "standard": "%d.%d" % MPI.Get_version(), "error": None}
    except Exception as e:   # libmpi missing or broken: report it, info must not fail
        return {"mpi4py": _dist_version("mpi4py"), "library": None, "standard": None,
                "error": f"{type(e).__name__}: {e}"}


def _torch() -> str | None:
    # The installed version without importing torch (seconds of start-up).
    return _dist_version("torch") if importlib.util.find_spec("torch") else None


def collect() -> dict:
    """Everything `nezha info` reports, as a JSON-ready dict."""
    from nezha.rails.tcp.ifaces import list_interfaces, select_interfaces
    from nezha.topo import rails as topo_rails
    cfg = config.Config.load(strict=False)   # show bad values instead of stopping at the first
    settings = [{"name": config.PREFIX + n, "value": cfg.display(n), "source": cfg.source(n),
                 "error": cfg.errors.get(n)} for n in config.PARAMS]
    interfaces = list_interfaces()
    spec = cfg.raw("SOCKET_IFNAME")
    rails = {"spec": spec or None, "tcp_allowed": "tcp" in cfg["RAILS"], "selected": [],
             "error": None}
    try:
        rails["selected"] = [i.name for i in select_interfaces(spec, interfaces)]
    except InvalidUsageError as e:
        rails["error"] = str(e)
    # Unset NEZHA_SOCKET_IFNAME: rails are formed with the other ranks at start-up; alone,
    # this host's view is what it would offer (nezha/topo/rails.py).
    formed = topo_rails.form([topo_rails.local_report(interfaces)])
    formation = {"rails": [vars(r) for r in formed.rails], "reasons": formed.reasons[0],
                 "control_known": bool(topo_rails.control_addresses()),
                 "notes": formed.notes}
    if not spec and not rails["error"]:
        rails["selected"] = [r.name for r in formed.rails]
    return {
        "algorithms": _algorithms(cfg, interfaces, rails["selected"]),
        "prior": _prior(cfg, interfaces, rails["selected"]),
        "nezha": nezha.__version__,
        "python": platform.python_version(),
        "executable": sys.executable,
        "numpy": _dist_version("numpy"),
        "cython": _dist_version("Cython"),
        "build": _build(),
        "mpi": _mpi(),
        "torch": _torch(),
        "include": nezha.get_include(),
        "settings": settings,
        "interfaces": [dict(vars(i), usable=i.usable) for i in interfaces],
        "rails": rails,
        "rail_formation": formation,
    }


def _local_size():
    for k in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        if (os.environ.get(k) or "").isdigit():
            return int(os.environ[k])
    return 2


def _algorithms(cfg, interfaces, selected) -> dict:
    """NEZHA_ALGO=auto's switch points (planner.switch_table) for this host's rails (their
    trusted nominal speeds, else the model's nominal rate; in a job the probe's rates) and
    the job's size (WORLD_SIZE, OMPI_COMM_WORLD_SIZE; else 4): one rank per host, and
    every rank on this host."""
    from nezha.planner import layout_planner
    from nezha.topo import rails as topo_rails
    try:
        n = int(os.environ.get("WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE") or 4)
        report = {r["name"]: r for r in topo_rails.local_report(interfaces)}
        speeds = [topo_rails.trusted_speed(report[nm]) if nm in report else None
                  for nm in selected]
        mbps = speeds if speeds and None not in speeds else None
        out = {"ranks": n, "rails_mbps": mbps, "rails": max(len(selected), 1), "layouts": {}}
        step = cfg["RAIL_ALPHA"]
        out["step_latency"] = (
            "model constants (NEZHA_RAIL_ALPHA=model)" if step.lower() == "model" else
            f"{float(step) * 1e6:g} us between hosts (NEZHA_RAIL_ALPHA)"
            if step.lower() != "auto" else
            "the model's constants here; in a job on two hosts or more measured at start-up "
            "(NEZHA_RAIL_ALPHA=auto" + (", but NEZHA_PROBE=off keeps the constants)"
                                        if cfg["PROBE"] == "off" else ")"))
        sl = cfg["SLICE_STEP"]
        out["slice_step"] = (
            "the constant (NEZHA_SLICE_STEP=model)" if sl.lower() == "model" else
            f"{float(sl):g} steps per step (NEZHA_SLICE_STEP)" if sl.lower() != "auto" else
            "the constant here; in a job on two hosts or more with two rails measured at "
            "start-up with the step latency (NEZHA_SLICE_STEP=auto)")
        for name, hosts in (("1 rank per host", list(range(n))), ("one host", [0] * n)):
            p = layout_planner(cfg, hosts, mbps, max(len(selected), 1), cfg["SOCKET_NCONNS"],
                               failover=len(selected) > 1 and cfg["FAILOVER"] and n > 1)
            out["layouts"][name] = {"table": p.switch_table(), "line": p.describe(),
                                    "piece": p.describe_piece()}
        # which rails each local rank drives in hierarchical collectives (NEZHA_HIER_RAILS),
        # by local rank mod rails: nearest NICs are agreed in a job (topo/placement.py)
        L = max(_local_size(), 2)
        hosts = [r // L for r in range(max(n // L, 2) * L)]
        p = layout_planner(cfg, hosts, mbps, max(len(selected), 1), cfg["SOCKET_NCONNS"])
        out["hier_rails"] = {"hosts": len(set(hosts)), "local": L,
                             "line": p.describe_rails(list(selected) or None),
                             "piece": p.describe_piece()}
        return out
    except Exception as e:  # noqa: BLE001 - a report, not a job: say what went wrong
        return {"error": f"{type(e).__name__}: {e}"}


def _prior(cfg, interfaces, selected) -> dict:
    """Where the cost model's first split would come from with these rails (this host's
    view; at start-up every rank's speeds are agreed): nominal speeds or the start-up probe."""
    from nezha.topo import rails as topo_rails
    from nezha.topo import rateprobe
    report = {n["name"]: n for n in topo_rails.local_report(interfaces)}
    rails = [(name, topo_rails.trusted_speed(report[name]) if name in report else None,
              report.get(name, {}).get("kind") == "loopback") for name in selected]
    try:
        go, why = rateprobe.decide(cfg["PROBE"], rails, 2, cfg["SPLIT"])
    except (KeyError, InvalidUsageError) as e:
        return {"probe": None, "why": f"unknown ({e})"}
    return {"probe": go, "why": why}


def _text(d: dict) -> str:
    build = d["build"]["kind"] + (f" ({d['build']['error']})" if d["build"]["error"] else "")
    mpi = d["mpi"]
    if mpi is None:
        mpi_text = "not installed"
    elif mpi["error"]:
        mpi_text = f"mpi4py {mpi['mpi4py']}, MPI library unusable ({mpi['error']})"
    else:
        mpi_text = f"mpi4py {mpi['mpi4py']}, {mpi['library']} (MPI {mpi['standard']})"
    lines = [f"nezha {d['nezha']}",
             f"  python    {d['python']} ({d['executable']})",
             f"  numpy     {d['numpy'] or 'not installed'}",
             f"  cython    {d['cython'] or 'not installed'}",
             f"  build     {build}",
             f"  mpi       {mpi_text}",
             f"  torch     {d['torch'] or 'not installed'}",
             f"  headers   {d['include'] or 'not in this install'}",
             "", "settings:"]
    wn = max(len(s["name"]) for s in d["settings"])
    wv = max(len(s["value"]) for s in d["settings"])
    for s in d["settings"]:
        line = f"  {s['name']:<{wn}}  {s['value']:<{wv}}  {s['source']}"
        lines.append(line + (f"  INVALID: {s['error']}" if s["error"] else ""))
    lines += ["", "interfaces:"]
    rails = d["rails"]
    for i in d["interfaces"]:
        addr = f"{i['address']}/{i['prefixlen']}" if i["address"] else "no IPv4"
        extra = ["loopback"] if i["is_loopback"] else []
        extra += [f"mtu {i['mtu']}"] if i["mtu"] else []
        extra += [f"{i['speed_mbps']} Mb/s"] if i["speed_mbps"] else []
        if i["name"] in rails["selected"]:
            extra.append(f"-> rail {rails['selected'].index(i['name'])}")
        elif not rails["spec"] and i["name"] in d["rail_formation"]["reasons"]:
            extra.append(d["rail_formation"]["reasons"][i["name"]])
        lines.append(f"  {i['name']:<12} {addr:<20} {'up' if i['is_up'] else 'down':<5} "
                     + "  ".join(extra))
    spec = f"NEZHA_SOCKET_IFNAME={rails['spec']}" if rails["spec"] else "NEZHA_SOCKET_IFNAME unset"
    lines.append("")
    if rails["error"]:
        lines.append(f"tcp rails: error: {rails['error']}")
    else:
        off = "" if rails["tcp_allowed"] else " (but NEZHA_RAILS does not allow tcp)"
        lines.append(f"tcp rails ({spec}): {', '.join(rails['selected'])}{off}")
        if not rails["spec"]:
            lines.append("  formed at start-up from the networks every host reaches; "
                         "this host alone offers the above")
            lines += [f"  {n}" for n in d["rail_formation"]["notes"]]
            if not d["rail_formation"].get("control_known", True):
                # outside a job no bootstrap address is known: say what a job would drop
                lines.append("  outside a job: in one, the network holding the bootstrap's "
                             "address (MASTER_ADDR, or mpirun's) is left out as management "
                             "when others reach every host")
    al = d["algorithms"]
    if "error" in al:
        lines.append(f"algorithm choice: unknown ({al['error']})")
    else:
        lines.append(f"algorithm choice (NEZHA_ALGO=auto: first size that takes the next "
                     f"algorithm; {al['ranks']} ranks, {al['rails']} rail(s)"
                     + (f" of {', '.join(str(m) for m in al['rails_mbps'])} Mbit/s"
                        if al["rails_mbps"] else " of unknown speed, nominal 10 Gbit/s; "
                        "in a job the probe's rates") + "):")
        lines.append(f"  step latency: {al['step_latency']}")
        if al.get("slice_step"):
            lines.append(f"  a second rail's slice: {al['slice_step']}")
        for name, lay in al["layouts"].items():
            lines.append(f"  {name}: " + lay.get("piece", ""))
            for coll, pts in lay["table"].items():
                text = ", ".join(f"{k} at {v} B" for k, v in pts.items()) or "no switch"
                lines.append(f"    {coll:<15} {text}")
        hr = al.get("hier_rails")
        if hr:
            lines.append(f"  {hr['hosts']} hosts x {hr['local']} ranks: {hr['line']}; "
                         + hr.get("piece", ""))
    pr = d["prior"]
    lines.append("cost-model prior: " + ("start-up rate probe (NEZHA_PROBE): " if pr["probe"]
                                         else "no probe: ") + pr["why"])
    return "\n".join(lines)


def main(argv=None) -> int:
    """Print the report as text, or as JSON with --json."""
    parser = argparse.ArgumentParser(prog="nezha info", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    d = collect()
    print(json.dumps(d, indent=2) if args.json else _text(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
