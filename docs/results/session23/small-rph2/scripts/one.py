import sys, os
sys.path.insert(0, os.getcwd())
from tests.test_coll_mpi import _run_world
np_, hosts, sel = int(sys.argv[1]), sys.argv[2], sys.argv[3]
extra = {"NEZHA_TEST_HOSTS": hosts}
extra.update(dict(kv.split("=", 1) for kv in sys.argv[4:]))
_run_world(np_, extra, False, sel)
print("OK", np_, hosts, sel)
