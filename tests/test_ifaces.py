"""Interface discovery on this machine, and NEZHA_SOCKET_IFNAME selection (NCCL grammar)."""
import re

import pytest

from nezha.errors import InvalidUsageError
from nezha.rails.tcp.ifaces import Interface, list_interfaces, select_interfaces


def names(ifaces):
    return [i.name for i in ifaces]


def up(name, address, **kw):
    return Interface(name, address, "255.255.255.0", 24, True, name == "lo", None, 1500, **kw)


# A made-up host: two rails with names that sort differently as text and as numbers.
FAKE = [up("lo", "127.0.0.1"), up("rail10", "10.0.10.1"), up("rail2", "10.0.2.1"),
        up("docker0", "172.17.0.1"), up("virbr0", "192.168.122.1"),
        Interface("eth1", None, None, None, True, False, None, 1500),
        Interface("eth2", "10.9.0.1", "255.255.0.0", 16, False, False, None, 1500)]


@pytest.fixture(scope="module")
def here():
    return {i.name: i for i in list_interfaces()}


def test_lo_is_listed_with_its_address(here):
    lo = here["lo"]
    assert lo.address == "127.0.0.1" and lo.netmask == "255.0.0.0" and lo.prefixlen == 8
    assert lo.is_up and lo.is_loopback and lo.usable and lo.mtu > 0
    assert lo.describe() == "lo (127.0.0.1/8, up)"
    assert all(not i.is_loopback for n, i in here.items() if not n.startswith("lo"))


def test_select_lo_by_prefix_and_exact_name(here):
    assert names(select_interfaces("lo")) == ["lo"] + sorted(
        n for n in here if n.startswith("lo") and n != "lo")
    assert names(select_interfaces("=lo")) == ["lo"]
    assert names(select_interfaces("=lo:5000")) == ["lo"]   # the port is ignored
    with pytest.raises(InvalidUsageError, match="no interface is named 'l';"):
        select_interfaces("=l")


def test_default_and_exclude(here):
    usable = sorted(n for n, i in here.items() if i.usable)
    others = [n for n in usable if not n.startswith(("lo", "docker", "virbr"))]
    assert sorted(names(select_interfaces(None))) == (others or ["lo"])
    assert select_interfaces("") == select_interfaces(None)
    # ^lo drops every name starting with lo, ^=lo only lo itself.
    for spec, rest in [("^lo", [n for n in usable if not n.startswith("lo")]),
                       ("^=lo", [n for n in usable if n != "lo"])]:
        if rest:
            assert sorted(names(select_interfaces(spec))) == rest
        else:
            with pytest.raises(InvalidUsageError, match="is excluded"):
                select_interfaces(spec)


def test_unknown_name_lists_every_interface(here):
    with pytest.raises(InvalidUsageError) as e:
        select_interfaces("lo,eth9zz")
    msg = str(e.value)
    assert msg.startswith("NEZHA_SOCKET_IFNAME=lo,eth9zz: no interface matches 'eth9zz'; "
                          "interfaces here: ")
    for iface in here.values():
        assert iface.describe() in msg
    assert "lo (127.0.0.1/8, up)" in msg


@pytest.mark.parametrize("spec,why", [
    ("^", "no names"), ("=", "no names"), (",", "no names"), ("lo:http", "bad port"),
    ("lo:70000", "bad port"), ("l o", "bad interface name"), (":80", "bad interface name"),
    ("=^lo", "bad interface name"), ("=lo,=eth0", "bad interface name"),
])
def test_parse_errors(spec, why):
    with pytest.raises(InvalidUsageError, match=re.escape(f"NEZHA_SOCKET_IFNAME={spec}: {why}")):
        select_interfaces(spec)


def test_each_entry_is_a_rail_in_the_given_order():
    assert names(select_interfaces("rail10,rail2", FAKE)) == ["rail10", "rail2"]
    assert names(select_interfaces("=rail2,rail10", FAKE)) == ["rail2", "rail10"]  # '=' is for all
    # One prefix matching several gives them all in natural name order.
    assert names(select_interfaces("rail", FAKE)) == ["rail2", "rail10"]
    assert names(select_interfaces("rail10,rail", FAKE)) == ["rail10", "rail2"]   # no repeats
    with pytest.raises(InvalidUsageError, match="no interface is named 'rail'"):
        select_interfaces("=rail", FAKE)


def test_default_exclusions_and_lo_fallback():
    assert names(select_interfaces(None, FAKE)) == ["rail2", "rail10"]
    assert names(select_interfaces(None, [FAKE[0], FAKE[5], FAKE[6]])) == ["lo"]
    with pytest.raises(InvalidUsageError, match="unset: no interface is up with an IPv4"):
        select_interfaces(None, [FAKE[5], FAKE[6]])


def test_exclude_list():
    assert names(select_interfaces("^rail1,docker,virbr", FAKE)) == ["lo", "rail2"]
    assert names(select_interfaces("^=rail1", FAKE)) == [
        "docker0", "lo", "rail2", "rail10", "virbr0"]


def test_matching_but_unusable_interface_is_an_error():
    with pytest.raises(InvalidUsageError, match="interface eth1 .from 'eth'. is without an IPv4"):
        select_interfaces("eth", FAKE)
    with pytest.raises(InvalidUsageError, match="interface eth2 .from 'eth2'. is down") as e:
        select_interfaces("=rail2,eth2", FAKE)
    assert "eth1 (no IPv4, up)" in str(e.value) and "eth2 (10.9.0.1/16, down)" in str(e.value)
