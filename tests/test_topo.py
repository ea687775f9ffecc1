"""The topology probe over real servers' hwloc exports (tests/fixtures/hwloc), its error paths,
and the sysfs fallback against hwloc on this machine."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from nezha.topo import model, probe, sysfs

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "hwloc")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HWLOC, WHY = probe.hwloc_module()
needs_hwloc = pytest.mark.skipif(HWLOC is None, reason=f"no hwloc binding: {WHY}")

# Expected values, counted from the raw XML without nezha:
#   packages: grep -c 'type="Package"' FILE
#   NUMA:     grep -c '<object type="NUMANode"' FILE (a plain grep also hits <distances2 type=...>)
#   NICs:     PCIDev elements with a direct OSDev child of osdev_type 2 (network) or 3
#             (OpenFabrics), counted once per PCIDev (ElementTree walk over the file)
#   GPUs:     PCIDev elements with pci_type "0302 ..." (3D controller), or with an OSDev child
#             named cuda*/nvml*/rsmi*/opencl* (the Radeon VGA in 32em64t has opencl0d1;
#             BMC VGAs - Matrox 102b, ASPEED 1a03 - carry nothing or only card0)
#   nearest:  read off the nesting of Bridge/PCIDev elements: the NICs fewest tree edges
#             away, then same Package/NUMA node; listed as a set (ties), first an RDMA one.
# Where the fixture README's table differs, the rule (network or OpenFabrics OS device
# on a PCI function) decided: 16intel64-manyVFs has 18 PCI functions but only 6 carry OS
# devices (eth0,1,4-7; usnic_0-2 share functions with eth4-6); 40intel64 has 4 Ethernet
# functions plus a QLogic IB function (ib0 + qib0), 5 NICs, where the table says 4.
# 40intel64-2g2n4c+pci.output is an XML export despite its name (hwloc's test corpus calls
# its expected outputs .output); it is loaded as XML like the others.
CASES = {
    "16intel64-manyVFs.xml": dict(packages=2, numa=2, nics=6, gpus={}),
    "192em64t-24n8c2t.xml": dict(packages=24, numa=24, nics=7, gpus={}),
    # GPU 06:00.0 shares the host bridge of package 0 with every NIC (bridges 00:01.0,
    # 00:05.0, 00:07.0): all three are 4 edges away. 11:00.0 and 14:00.0 are on package 1,
    # which has no NIC: all three again, across the machine.
    "24em64t-2n6c2t-pci.xml": dict(packages=2, numa=2, nics=3, gpus={
        "gpu@0000:06:00.0": {"mlx4_0", "eth0", "eth1"},
        "gpu@0000:11:00.0": {"mlx4_0", "eth0", "eth1"},
        "gpu@0000:14:00.0": {"mlx4_0", "eth0", "eth1"}}),
    # Bridge 80:03.0 holds cuda0 (84:00.0), the Radeon (84:00.1) and mlx5_0 (04:00.0);
    # 83:00.0 is under 80:02.0 next to it; 03:00.0 is on package 0, the NICs on package 1.
    "32em64t-2n8c2t-pci-wholeio.xml": dict(packages=2, numa=2, nics=3, gpus={
        "gpu@0000:03:00.0": {"mlx5_0", "eth0", "eth1"},
        "gpu@0000:83:00.0": {"mlx5_0", "eth0", "eth1"},
        "cuda0": {"mlx5_0"},
        "opencl0d1": {"mlx5_0"}}),
    "40intel64-2g2n4c+pci.output": dict(packages=4, numa=4, nics=5, gpus={}),
    "96em64t-4n4d3ca2co-pci.xml": dict(packages=16, numa=4, nics=8, gpus={}),
    # POWER9: every device behind its own host bridge, so on one package all NICs are equally
    # far (8 edges): the ConnectX-5 ports and the Ethernet ports of that package.
    "coral-lassen.xml": dict(packages=2, numa=2, nics=6, gpus={
        "cuda0": {"mlx5_0", "mlx5_1", "enP5p1s0f0", "enP5p1s0f1"},
        "cuda1": {"mlx5_0", "mlx5_1", "enP5p1s0f0", "enP5p1s0f1"},
        "cuda2": {"mlx5_2", "mlx5_3"},
        "cuda3": {"mlx5_2", "mlx5_3"}}),
    # Both P100s and mlx5_0 hang off one PCIe switch (02:00.0, ports 03:04/03:10/03:14).
    "cts1-pascal.xml": dict(packages=2, numa=2, nics=3, gpus={
        "cuda0": {"mlx5_0"}, "cuda1": {"mlx5_0"}}),
    "nvidiaDGX2.xml": dict(packages=2, numa=2, nics=0,
                           gpus={f"nvml{i}": set() for i in range(16)}),
    "power8gpudistances.xml": dict(packages=2, numa=2, nics=0,
                                   gpus={f"cuda{i}": set() for i in range(4)}),
}
FIRST = {"24em64t-2n6c2t-pci.xml": "mlx4_0", "coral-lassen.xml": "mlx5_0"}


def test_every_fixture_has_a_case():
    files = {f for f in os.listdir(FIXTURES) if f.endswith((".xml", ".output"))}
    assert files == set(CASES)


_GPU_OSDEVS = ("cuda", "nvml", "rsmi", "opencl")  # in the order a GPU's name is taken from


def _count_from_the_file(path):
    """CASES' numbers for one export by the rules above, with ElementTree and no nezha: the
    oracle the probe's numbers are checked against. Nearest NICs: fewest tree edges between
    the two PCIDev elements (no fixture needs the NUMA tie-break); a NIC is named by its
    OpenFabrics device, else its network device."""
    root = ET.parse(path).getroot()
    parent = {c: p for p in root.iter() for c in p}
    objs = list(root.iter("object"))

    def osdevs(e):
        return [c for c in e if c.tag == "object" and c.get("type") == "OSDev"]

    nics, gpus = [], []
    for e in objs:
        if e.get("type") != "PCIDev":
            continue
        devs = osdevs(e)
        if any(c.get("osdev_type") in ("2", "3") for c in devs):
            of = [c.get("name") for c in devs if c.get("osdev_type") == "3"]
            nics.append((e, (of or [c.get("name") for c in devs])[0]))
        named = sorted((c.get("name") for c in devs if c.get("name", "").startswith(_GPU_OSDEVS)),
                       key=lambda n: _GPU_OSDEVS.index(next(p for p in _GPU_OSDEVS
                                                            if n.startswith(p))))
        if named or (e.get("pci_type", "").startswith("0302") and not devs):
            gpus.append((e, named[0] if named else "gpu@" + e.get("pci_busid")))

    def up(e):
        out = []
        while e is not None:
            out.append(e)
            e = parent.get(e)
        return out

    def edges(a, b):
        ua, ub = up(a), up(b)
        common = next(x for x in ua if x in ub)
        return ua.index(common) + ub.index(common)

    near = {}
    for g, name in gpus:
        d = {n: edges(g, e) for e, n in nics}
        near[name] = {n for n in d if d[n] == min(d.values())}
    return dict(packages=sum(e.get("type") == "Package" for e in objs),
                numa=sum(e.get("type") == "NUMANode" for e in objs), nics=len(nics), gpus=near)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_are_counted_from_the_files(name):
    """The expected numbers are the files' own, not copied from the probe's output."""
    assert _count_from_the_file(os.path.join(FIXTURES, name)) == CASES[name]


def _run_topo(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "nezha", "topo", *args], env=env,
                          capture_output=True, text=True, timeout=60)


@needs_hwloc
@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture(name):
    want = CASES[name]
    out = _run_topo("--xml", os.path.join(FIXTURES, name), "--json")
    assert out.returncode == 0, out.stderr
    t = json.loads(out.stdout)
    assert len(t["packages"]) == want["packages"]
    assert len(t["numa_nodes"]) == want["numa"]
    assert len(t["nics"]) == want["nics"]
    assert len({n["busid"] for n in t["nics"]}) == want["nics"]   # one per PCI function
    assert {g["name"]: set(g["nearest_nics"]) for g in t["gpus"]} == want["gpus"]
    for g in t["gpus"]:
        assert len(g["nearest_nics"]) == len(set(g["nearest_nics"]))
    if name in FIRST:
        assert all(g["nearest_nics"][0] == FIRST[name] for g in t["gpus"][:1])


@needs_hwloc
def test_nic_with_network_and_openfabrics_device_counts_once():
    t = probe.load(os.path.join(FIXTURES, "32em64t-2n8c2t-pci-wholeio.xml"))
    ib = [n for n in t.nics if "ib0" in n.netdevs]
    assert len(ib) == 1 and ib[0].ofdevs == ["mlx5_0"] and ib[0].kind == "infiniband"
    usnic = probe.load(os.path.join(FIXTURES, "16intel64-manyVFs.xml"))
    assert sorted(n.kind for n in usnic.nics) == ["ethernet"] * 3 + ["usnic"] * 3


@needs_hwloc
def test_numa_distances_and_localities():
    t = probe.load(os.path.join(FIXTURES, "coral-lassen.xml"))
    assert t.numa_distances["nodes"] == [0, 8]
    assert t.numa_distances["values"] == [[10, 40], [40, 10]]
    assert {n.name: n.numa_node for n in t.nics}["mlx5_2"] == 8
    # 40intel64: I/O hangs off Groups of two NUMA nodes, so no single node is named.
    t = probe.load(os.path.join(FIXTURES, "40intel64-2g2n4c+pci.output"))
    assert all(n.numa_node is None for n in t.nics)


@needs_hwloc
def test_text_summary_fits_a_screen():
    out = _run_topo("--xml", os.path.join(FIXTURES, "nvidiaDGX2.xml"))
    assert out.returncode == 0, out.stderr
    assert "16 GPUs" in out.stdout and len(out.stdout.splitlines()) < 40


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"hello, not xml\n", "not XML"),
    (b"<?xml version='1.0'?><project><a/></project>", "root element is <project>"),
    (b"<?xml version='1.0'?><topology version='3.0'><object type='Machine'/></topology>",
     "format 3.0"),
])
def test_bad_topology_files(tmp_path, content, message):
    path = tmp_path / "topo.xml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(probe.TopologyError, match=message):
        probe.load(str(path))
    out = _run_topo("--xml", str(path))
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


@needs_hwloc
def test_hwloc_rejects_a_broken_export(tmp_path):
    # Passes the quick check (root <topology>), fails in hwloc itself: still a clear error.
    path = tmp_path / "broken.xml"
    path.write_text("<?xml version='1.0'?><topology version='2.0'><object type='Nonsense'>"
                    "</object></topology>")
    with pytest.raises(probe.TopologyError, match="hwloc cannot"):
        probe.load(str(path))


@needs_hwloc
def test_api_version_checked():
    runtime, compiled = HWLOC.api_version()
    assert runtime >> 16 == compiled >> 16 == 2


@needs_hwloc
def test_sysfs_fallback_agrees_with_hwloc_here():
    hw = probe.load()
    fs = model.build(sysfs.load(), "sysfs")
    assert (len(fs.packages), len(fs.numa_nodes), fs.cores, fs.pus) == \
           (len(hw.packages), len(hw.numa_nodes), hw.cores, hw.pus)
    assert sorted(n.busid for n in fs.nics) == sorted(n.busid for n in hw.nics)
    assert sorted(g.busid for g in fs.gpus) == sorted(g.busid for g in hw.gpus)
    assert fs.notes and not hw.notes   # the fallback says what it cannot tell


def test_fallback_without_hwloc_logs_why(monkeypatch, capsys):
    monkeypatch.setattr(probe, "hwloc_module", lambda: (None, "not built (test)"))
    t = probe.load()
    assert t.source.startswith("sysfs") and t.notes
    assert "not built (test)" in capsys.readouterr().err
    with pytest.raises(probe.TopologyError, match="needs hwloc"):
        probe.load(os.path.join(FIXTURES, "cts1-pascal.xml"))


_NO_HWLOC = {
    # the extension cannot be imported (not built, or libhwloc.so missing at run time)
    "import": "sys.modules['nezha._core.hwloc'] = None",
    # it loads, but the runtime library is another API major than the one compiled against
    "api": ("import types\n"
            "def check():\n"
            "    raise RuntimeError('hwloc runtime API 0x30000, compiled against 0x20b00')\n"
            "sys.modules['nezha._core.hwloc'] = types.SimpleNamespace(check_api_version=check)"),
}


@pytest.mark.parametrize("how, reason", [("import", "nezha._core.hwloc is not available"),
                                         ("api", "hwloc runtime API 0x30000")])
def test_no_hwloc_at_run_time_falls_back_and_says_why(how, reason):
    """`nezha topo` in a process where hwloc cannot be used: this machine from sysfs, the
    reason in the log; another machine's XML is a clear error (it needs hwloc)."""
    code = ("import runpy, sys\n" + _NO_HWLOC[how] + "\n"
            "sys.argv = ['nezha', 'topo'] + sys.argv[1:]\n"
            "runpy.run_module('nezha', run_name='__main__')\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = [sys.executable, "-c", code]
    out = subprocess.run(run + ["--json"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    t = json.loads(out.stdout)
    assert t["source"].startswith("sysfs") and t["notes"], t
    assert t["packages"] and t["numa_nodes"]
    assert "topology from sysfs, not hwloc" in out.stderr and reason in out.stderr, out.stderr
    xml = os.path.join(FIXTURES, "cts1-pascal.xml")
    out = subprocess.run(run + ["--xml", xml], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "needs hwloc" in out.stderr and reason in out.stderr
    assert "Traceback" not in out.stderr


@needs_hwloc
@pytest.mark.parametrize("name, local_rank, rails_, mode, want", [
    # local rank -> GPU -> its nearest NIC -> that NIC's NUMA node (cpus from the XML's cpuset)
    ("cts1-pascal.xml", 1, (), "numa", "NUMA node 0 (GPU cuda1's nearest NIC mlx5_0)"),
    ("coral-lassen.xml", 2, (), "numa", "NUMA node 8 (GPU cuda2's nearest NIC mlx5_2)"),
    ("coral-lassen.xml", 2, (), "core", "core 2 of NUMA node 8"),
    # no GPU for the rank: its first rail's NIC (eth2 sits on NUMA node 1)
    ("96em64t-4n4d3ca2co-pci.xml", 0, ("eth2",), "numa", "NUMA node 1 (rail NIC eth2)"),
    # ib0 hangs off a Group of NUMA nodes 1 and 3: near both
    ("40intel64-2g2n4c+pci.output", 0, ("ib0",), "numa", "NUMA nodes 1,3 (rail NIC ib0)"),
])
def test_bind_plan(name, local_rank, rails_, mode, want):
    from nezha.topo import bind
    t = probe.load(os.path.join(FIXTURES, name))
    b = bind.plan(t, mode, local_rank, rails_)
    assert b.why.startswith(want)
    nodes = {n.index: set(n.cpus) for n in t.numa_nodes}
    if mode == "core":
        assert len(b.cpus) == t.pus // t.cores   # one core's PUs
        assert set(b.cpus) <= nodes[8]
    elif name.startswith("40intel64"):
        assert set(b.cpus) == nodes[1] | nodes[3]
    else:
        assert set(b.cpus) == nodes[int(want.split()[2])]
    assert bind.plan(t, "none", local_rank, rails_).cpus is None


BIND_WORKER = """
import glob, json, os
import numpy as np
import nezha
def tasks():
    return {t: open(t + "/status").read().split("Cpus_allowed_list:")[1].split()[0]
            for t in glob.glob("/proc/self/task/*")}
before = tasks()
c = nezha.Communicator()
x = np.ones(1 << 16, np.float32)
c.iallreduce(x).wait()   # starts the progress thread
after = tasks()
print(json.dumps({"main": after[f"/proc/self/task/{os.getpid()}"],
                  "ncpus": len(os.sched_getaffinity(0)), "all": os.cpu_count(),
                  "new": sorted(v for t, v in after.items() if t not in before)}))
c.close()
"""


def test_bind_core_covers_the_threads_nezha_starts():
    # Threads started after the binding (progress, health guard) inherit it; threads others
    # started earlier (numpy's BLAS) are not nezha's to move.
    procs = []
    for rank in range(2):
        # a long rail timeout: two ranks pinned to two cores of a busy machine are slow to beat
        env = dict(os.environ, PYTHONPATH=ROOT, NEZHA_BIND="core", NEZHA_RAILS="loop,shm",
                   NEZHA_RAIL_TIMEOUT="5",
                   RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(29700 + os.getpid() % 200))
        env.pop("OMPI_COMM_WORLD_SIZE", None)
        procs.append(subprocess.Popen([sys.executable, "-c", BIND_WORKER], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        got = json.loads(out.splitlines()[-1])
        assert got["ncpus"] < got["all"] or got["all"] == 1   # one core's PUs
        assert got["new"], "no thread was started"
        assert set(got["new"]) == {got["main"]}


def _obj(typ, parent, **kw):
    o = {"type": typ, "parent": parent, "infos": {}, "name": None, "os_index": None,
         "logical_index": 0, "cpuset": None, "nodeset": None}
    o.update(kw)
    return o


def _pci(busid, class_id):
    return {"busid": busid, "class_id": class_id, "linkspeed_gbps": 0.0}


def test_nearest_nic_ties_broken_by_numa():
    """No fixture needs it: a GPU on package 0, one NIC behind package 1's host bridge and one
    behind a bridge of the machine's, both 6 edges away: the NIC whose locality shares the
    GPU's NUMA node (the machine's: nodes 0 and 1) is nearest, not both."""
    objs = [_obj("Machine", -1, nodeset=[0, 1], cpuset=[0, 1, 2, 3]),
            _obj("Package", 0, os_index=0, nodeset=[0], cpuset=[0, 1]),
            _obj("NUMANode", 1, os_index=0, nodeset=[0], cpuset=[0, 1]),
            _obj("Package", 0, os_index=1, nodeset=[1], cpuset=[2, 3]),
            _obj("NUMANode", 3, os_index=1, nodeset=[1], cpuset=[2, 3]),
            _obj("Bridge", 1),
            _obj("PCIDev", 5, pci=_pci("0000:01:00.0", model.PCI_CLASS_3D)),
            _obj("Bridge", 3),
            _obj("PCIDev", 7, pci=_pci("0000:81:00.0", 0x0200)),
            _obj("OSDev", 8, name="eth1", osdev_type=model.OSDEV_NETWORK),
            _obj("Bridge", 0),
            _obj("Bridge", 10),
            _obj("PCIDev", 11, pci=_pci("0000:40:00.0", 0x0200)),
            _obj("OSDev", 12, name="eth2", osdev_type=model.OSDEV_NETWORK)]
    t = model.build({"objects": objs}, "test")
    assert [n.name for n in t.nics] == ["eth2", "eth1"]
    (gpu,) = t.gpus
    assert gpu.name == "gpu@0000:01:00.0" and gpu.nic_hops == 6
    assert gpu.nearest_nics == ["eth2"]
