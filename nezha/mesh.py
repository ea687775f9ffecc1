"""Connect every rank to every other on every rail: data channels plus a control link.

Each rail gets NEZHA_SOCKET_NCONNS data channels (lanes) per peer and one control
connection per peer, on which a failing rank tells the others why. A channel's endpoint to
a peer on the same host is shared memory (transports/shm.py) unless NEZHA_RAILS leaves shm
out; to other hosts it is TCP over the rail's NIC: the lower rank accepts and the higher
rank connects, all of it at once (see rails/tcp/connect.py).
"""
import os
import socket

from nezha import log
from nezha.bootstrap import auth
from nezha.errors import InvalidUsageError, PeerError
from nezha._core.engine import TcpEndpoint
from nezha.rails.tcp.connect import establish, tune
from nezha.topo import crowd
from nezha.transports import fault, shm

TCP_RTO_MAX_MS = 44  # linux/tcp.h (>= 6.11)
TCP_RTO_MIN_US = 45  # linux/tcp.h (>= 6.15)
TCP_THIN_LINEAR_TIMEOUTS = 16  # linux/tcp.h


def _tune_ctrl(s, rail_timeout):
    """A control connection carries heartbeats: a thin stream whose lost segment must not
    hold the later ones back for TCP's 200 ms minimum RTO (or its backoff) on a full link,
    where the rail would look silent (NEZHA_RAIL_TIMEOUT) though it is only congested.
    Each option is skipped where the kernel lacks it."""
    for opt, val in ((TCP_RTO_MAX_MS, 1000),  # heartbeats again within 1 s of a heal
                     (TCP_RTO_MIN_US, max(8000, int(rail_timeout * 1e6 / 3))),
                     (TCP_THIN_LINEAR_TIMEOUTS, 1)):  # no backoff for thin streams
        try:
            s.setsockopt(socket.IPPROTO_TCP, opt, val)
        except OSError:
            pass


class Mesh:
    """The connected sockets of one communicator and the names used in messages."""

    def __init__(self, boot, rails, nconns, timeout, bufsize, use_shm=False, shm_bytes=0,
                 host=None, faults=None, rail_timeout=0.06, near=(), zerocopy_min=0):
        self.rail_timeout = rail_timeout
        self.zerocopy_min = zerocopy_min  # > 0: data sends this large go zero-copy
        self.rank, self.size = boot.rank, boot.size
        self.rails, self.nconns = rails, nconns
        self.nchan = len(rails) * nconns
        me = {"host": socket.gethostname(), "pid": os.getpid(),
              "host_id": shm.host_id(host), "shm": bool(use_shm), "shm_tag": shm.new_tag(),
              **crowd.machine_facts(),
              "near_rails": list(near),  # this rank's nearest rails (topo/placement.py)
              "rails": [dict(name=r.name, **r.listen()) for r in rails]}
        self.timeout, self.bufsize = timeout, bufsize
        self.shm = None
        # the communicator's "is rank p gone?" (every control connection to it closed),
        # asked while re-admission waits for p's connections (establish's gone)
        self.peer_gone = None
        # tests: every endpoint behind the fault layer (transports/fault.py)
        self.faults = fault.FaultTable(faults) if faults else None
        try:
            self.peers = boot.allgather(me)
            self._check_peers()
            self._check_rails()
            hosts = list(dict.fromkeys(p["host_id"] for p in self.peers))
            self.host_of = [hosts.index(p["host_id"]) for p in self.peers]
            self.crowding = crowd.crowding(self.peers)  # ranks per CPU (the planner's steps)
            # every rank must agree, or a pair would wait on two different transports
            if all(p["shm"] for p in self.peers) and len(hosts) < self.size:
                shm.sweep()
                self.shm = shm.ShmLinks(boot, self.peers, self.nchan, shm_bytes, me["shm_tag"])
            self.socks = self._connect(boot.secret, timeout, bufsize)
        except BaseException:
            if self.shm is not None:
                self.shm.close()
            for r in rails:
                r.close()
            raise
        # listeners stay open: a failed rail's channels reconnect through them

    def _check_peers(self):
        """Every rank's record has the shape of `me` above: a buggy or hostile (but
        authenticated) rank is a PeerError naming it, not a TypeError somewhere later."""
        fields = {"host": str, "pid": int, "host_id": str, "shm": bool, "shm_tag": str,
                  "rails": list}
        ok = isinstance(self.peers, list) and len(self.peers) == self.size
        for i, p in enumerate(self.peers if ok else []):
            good = isinstance(p, dict) and all(isinstance(p.get(k), t) for k, t in fields.items())
            good = good and all(isinstance(r, dict) and isinstance(r.get("name"), str)
                                and isinstance(r.get("addr"), str)
                                and isinstance(r.get("port"), int) for r in p["rails"])
            if not good:
                raise PeerError(f"nezha: rank {self.rank}: rank {i} sent a malformed endpoint "
                                "record at start-up (another nezha version, or not nezha)", peer=i)
        if not ok:
            raise PeerError(f"nezha: rank {self.rank}: the start-up exchange returned "
                            f"{type(self.peers).__name__}, not {self.size} records")

    def _check_rails(self):
        counts = {len(p["rails"]) for p in self.peers}
        if len(counts) != 1:
            desc = "; ".join(f"rank {i} ({p['host']}): {[r['name'] for r in p['rails']] or 'none'}"
                             for i, p in enumerate(self.peers))
            raise InvalidUsageError(
                "nezha: ranks found different numbers of rails (NEZHA_SOCKET_IFNAME must give "
                f"the same number of interfaces on every host): {desc}")

    def chan_name(self, chan):
        """Rail name of a channel, with the lane when there are several."""
        name = self.rails[chan // self.nconns].name
        return f"{name}#{chan % self.nconns}" if self.nconns > 1 else name

    def peer_name(self, peer):
        """'host pid N' of a rank."""
        p = self.peers[peer]
        return f"{p['host']} pid {p['pid']}"

    def _connect(self, secret, timeout, bufsize):
        targets, expected = {}, set()
        for peer in range(self.size):
            if peer == self.rank:
                continue
            for ri, rail in enumerate(self.rails):
                keys = [(peer, ri * self.nconns + lane, auth.PURPOSE_DATA)
                        for lane in range(self.nconns)
                        if self.shm is None or (peer, ri * self.nconns + lane) not in self.shm.eps]
                keys.append((peer, ri, auth.PURPOSE_CTRL))
                for key in keys:
                    if peer < self.rank:
                        h = self.peers[peer]["rails"][ri]
                        targets[key] = (h["addr"], h["port"], rail.address)
                    else:
                        expected.add(key)
        names = {p: self.peer_name(p) for p in range(self.size)}
        names.update({("chan", c): self.chan_name(c) for c in range(self.nchan)})
        listeners = [r.listener for r in self.rails]
        socks = establish(self.rank, secret, listeners, targets, expected, timeout, names,
                          gone_if_refused=True, probes=self._probes(0))
        for (peer, chan, purpose), s in socks.items():
            tune(s, bufsize if purpose == auth.PURPOSE_DATA else 0)
            if purpose == auth.PURPOSE_CTRL:
                _tune_ctrl(s, self.rail_timeout)
        log.info("INIT", f"connected to {self.size - 1} peers over "
                 f"{[r.name for r in self.rails]} x {self.nconns} lanes "
                 f"({len(socks)} connections)")
        return socks

    def endpoints(self):
        """Endpoint per (channel, peer) in engine order (channel * size + peer), None for
        self: shared memory to a peer on this host, else its TCP socket."""
        return [None if p == self.rank else self._endpoint(p, c)
                for c in range(self.nchan) for p in range(self.size)]

    def _endpoint(self, peer, chan):
        if self.shm is not None and (peer, chan) in self.shm.eps:
            return self.wrap(self.shm.eps[(peer, chan)], peer, chan)
        return self.tcp_endpoint(self.socks[(peer, chan, auth.PURPOSE_DATA)], peer, chan)

    def tcp_endpoint(self, sock, peer, chan):
        """The endpoint of a connected data socket to peer on chan."""
        ep = TcpEndpoint(sock, self.zerocopy_min)
        if self.zerocopy_min and ep.zerocopy_error:
            log.warn("INIT", f"NEZHA_ZEROCOPY=on: the kernel refused SO_ZEROCOPY "
                     f"({os.strerror(ep.zerocopy_error)}); sends to {self.peer_name(peer)} copy")
        return self.wrap(ep, peer, chan)

    def wrap(self, ep, peer, slot):
        """ep as the engine gets it: behind the fault layer when a test asked for one."""
        return fault.wrap(ep, self.faults, self.rank, peer, slot) if self.faults else ep

    def transport(self, peer, chan=0):
        """Name of the transport that carries chan's bytes to peer ("shm" or "tcp")."""
        if peer == self.rank:
            return "self"
        return "shm" if self.shm is not None and (peer, chan) in self.shm.eps else "tcp"

    def ctrl_endpoints(self):
        """Control endpoint per (rail, peer) (rail * size + peer), None for self."""
        return [self.wrap(TcpEndpoint(self.socks[(p, ri, auth.PURPOSE_CTRL)]), p, fault.CTRL + ri)
                if p != self.rank else None
                for ri in range(len(self.rails)) for p in range(self.size)]

    def close_channel(self, chan):
        """Close a dead channel's data connections (their streams are out of step); a
        re-admitted channel comes back over TCP to every peer (reconnect)."""
        if self.shm is not None:
            self.shm.close_channel(chan)
        for key in [k for k in self.socks if k[1] == chan and k[2] == auth.PURPOSE_DATA]:
            try:
                self.socks.pop(key).close()
            except OSError:
                pass

    def reconnect(self, chans, generation, secret):
        """New data connections for chans with every peer (all ranks call this together),
        replacing the channels' old ones."""
        out = self.links(chans, generation, secret)
        for (peer, c), s in out.items():
            self.socks[(peer, c, auth.PURPOSE_DATA)] = s
        return out

    def links(self, chans, generation, secret):
        """Fresh data connections for chans with every peer, {(peer, chan): socket}, kept
        apart from the mesh's own (all ranks call this together).

        The channel id on the wire carries the generation, so that a late connection from
        an earlier attempt can never be taken for this one."""
        targets, expected = {}, set()
        for peer in range(self.size):
            if peer == self.rank:
                continue
            for c in chans:
                ri = c // self.nconns
                key = (peer, c + (generation << 16), auth.PURPOSE_DATA)
                if peer < self.rank:
                    h = self.peers[peer]["rails"][ri]
                    targets[key] = (h["addr"], h["port"], self.rails[ri].address)
                else:
                    expected.add(key)
        listeners = [self.rails[c // self.nconns].listener for c in sorted(set(chans))]
        names = {p: self.peer_name(p) for p in range(self.size)}  # errors name who and where
        names.update({("chan", c + (generation << 16)): self.chan_name(c) for c in chans})
        got = establish(self.rank, secret, list(dict.fromkeys(listeners)), targets, expected,
                        self.timeout, names, gone_if_refused=True,
                        probes=self._probes(min(chans) // self.nconns), gone=self.peer_gone)
        out = {}
        for (peer, cg, purpose), s in got.items():
            tune(s, self.bufsize)
            out[(peer, cg & 0xFFFF)] = s
        return out

    def _probes(self, ri):
        """Listeners on rail ri of the ranks whose connections this rank waits for (the
        higher ones): every rank listened before the exchange of addresses, so a refused
        probe means that rank is gone (establish, tests/test_peer_death.py)."""
        return {p: (self.peers[p]["rails"][ri]["addr"], self.peers[p]["rails"][ri]["port"],
                    self.rails[ri].address)
                for p in range(self.rank + 1, self.size)}

    def close(self):
        """Close every connection and listener."""
        for s in self.socks.values():
            try:
                s.close()
            except OSError:
                pass
        self.socks = {}
        if self.shm is not None:
            self.shm.close()
        for r in self.rails:
            r.close()
