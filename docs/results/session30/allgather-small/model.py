# The rails rd allgather gets with and without ("allgather", "rd") in ONE_RAIL_IN_FIRST_STEP
# (named RAILS_MEASURED until session 31), every 256 B
# to 64 KiB of payload, for the lab samples of the tests (400 + 400 and 400 + 100).
# Run: cd /tmp && PYTHONPATH=/work/h46 python model.py
import sys; sys.path.insert(0, "/work/h46/tests")
from test_step_latency import _lab_planner, LAB_HOP_29, LAB_HOP
import nezha.planner as P, nezha
print(nezha.__file__)
for hop in (LAB_HOP_29, LAB_HOP):
    for mb in ([227.0,227.0],[235.1,235.1],[248.0,60.0]):
        p = _lab_planner(mb, hop)
        P.ONE_RAIL_IN_FIRST_STEP = (("reduce_scatter","rd"),)
        old = [p._count_rails("allgather","rd",s) for s in range(256, 64<<10, 256)]
        P.ONE_RAIL_IN_FIRST_STEP = (("reduce_scatter","rd"),("allgather","rd"))
        new = [p._count_rails("allgather","rd",s) for s in range(256, 64<<10, 256)]
        diff = [(256*(i+1), o, n) for i,(o,n) in enumerate(zip(old,new)) if o!=n]
        print(hop["ns"][0], mb, diff, "edge one rail up to", max(256*(i+1) for i,n in enumerate(new) if n==1))
