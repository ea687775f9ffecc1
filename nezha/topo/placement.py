"""Which local ranks drive which rail in hierarchical collectives (NEZHA_HIER_RAILS).

Rail-aligned, as NCCL's multi-rail rings: a slice on rail r crosses hosts only from the local
positions rail r belongs to, so each local rank's cross-host bytes leave through its own
NIC(s). Who owns a rail: the local ranks whose nearest NIC is on it (topo/bind.py
nearest_rails, the same on every host), else local rank i drives rail i mod R (and, with more
rails than local ranks, rails i + L, i + 2L, ...). Computed over the live rails, so after a
rail dies its ranks drive the survivors.
"""


def modular(L, R):
    """owners[k] for rail k of R: positions i with i = k (mod min(L, R))."""
    m = min(L, R)
    return [[i for i in range(L) if i % m == k % m] for k in range(R)]


def from_nearest(near, L, R):
    """owners[k] from near (per local position, the indices of its nearest rails among the
    R), or None when some rail or some position would be left without a partner."""
    if near is None or len(near) != L:
        return None
    own = [[i for i in range(L) if k in near[i]] for k in range(R)]
    if not all(own) or not all(any(k < R for k in n) for n in near):
        return None
    return own


def balanced(owners, L):
    """Every rail has as many owners as every other, and every position owns as many rails:
    then the bytes within the host and across hosts are those of the striped layout."""
    per_rail = {len(o) for o in owners}
    per_pos = {sum(i in o for o in owners) for i in range(L)}
    return len(per_rail) == 1 and len(per_pos) == 1


def agreed_near(records, hosts, R):
    """Per local position, the rail indices (0..R-1; a rail is the same index on every
    host) that every host's rank at that position reports as nearest (records: each rank's
    list; hosts: every host's ranks in local order), or None where they differ or one
    reports none."""
    near = []
    for i in range(len(hosts[0])):
        got = {tuple(sorted(k for k in (records[h[i]] or ()) if isinstance(k, int)
                            and 0 <= k < R)) for h in hosts}
        if len(got) != 1 or not next(iter(got)):
            return None
        near.append(list(got.pop()))
    return near


def describe(owners, L, names):
    """'local rank 0 -> rail0; local rank 1 -> rail1' (names: of the rails owners covers)."""
    return "; ".join(f"local rank {i} -> " + (",".join(names[k] for k, o in enumerate(owners)
                                                        if i in o) or "none")
                     for i in range(L))
