"""`nezha bench compare` with extra nezha-all rows that differ by NEZHA_* settings, so that a
setting is compared with the default in one lab, interleaved (the suite rotates the order).

  python docs/results/session25/fast-rails/variants.py --variant ring:NEZHA_ALGO=ring \
      --variant rab:NEZHA_ALGO=rab -- --rates 1600mbit --systems nezha-all --min-size 1M ...

Each --variant NAME:K=V[,K=V] adds the row nezha-NAME (nezha on all rails plus those
settings); name it in --systems after `--` with the usual compare options."""
import argparse
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 4)))
from nezha import benchcli  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", default=[])
    a, rest = ap.parse_known_args()
    rest = [x for x in rest if x != "--"]
    cmp = benchcli._load_compare()
    for v in a.variant:
        name, _, kv = v.partition(":")
        env = (("NEZHA_SOCKET_IFNAME", "{ifnames}"),) + tuple(
            tuple(x.split("=", 1)) for x in kv.split(",") if x)
        cmp.SYSTEMS.append(cmp.System(f"nezha-{name}", f"nezha on all rails, {kv}", "nezha",
                                      "all", env=env, when="named"))
    benchcli._load_compare = lambda: cmp
    names = [s for r in rest for s in r.split(",")]
    missing = [f"nezha-{v.partition(':')[0]}" for v in a.variant
               if f"nezha-{v.partition(':')[0]}" not in names]
    if missing:
        sys.exit(f"name the variants in --systems: {missing}")
    return benchcli.main(["compare"] + rest)


if __name__ == "__main__":
    sys.exit(main())
