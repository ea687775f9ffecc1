"""Record every frame on one interface of this namespace (AF_PACKET, kernel timestamps):
one line per frame, `t_ns dir len src>dst flags seq ack paylen` (TCP over IPv4), until
SNIFF_SECONDS pass or SNIFF_MAX frames. usage: sniff.py IFACE OUT"""
import os, socket, struct, sys, time

iface, out = sys.argv[1], sys.argv[2]
secs = float(os.environ.get("SNIFF_SECONDS", "30"))
cap = int(os.environ.get("SNIFF_MAX", "200000"))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.bind((iface, 0))
s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
s.settimeout(0.5)
rows = []
end = time.monotonic() + secs
while time.monotonic() < end and len(rows) < cap:
    try:
        data, anc, _, addr = s.recvmsg(128, 256)
    except socket.timeout:
        continue
    t = 0
    for lvl, typ, d in anc:
        if lvl == socket.SOL_SOCKET and typ == 35:
            sec, ns = struct.unpack("qq", d[:16])
            t = sec * 1000000000 + ns
    if len(data) < 14 + 20 or data[12:14] != b"\x08\x00" or data[23] != 6:
        continue
    ihl = (data[14] & 15) * 4
    tot = struct.unpack("!H", data[16:18])[0]
    src, dst = socket.inet_ntoa(data[26:30]), socket.inet_ntoa(data[30:34])
    tcp = 14 + ihl
    sp, dp, seq, ack, off = struct.unpack("!HHIIB", data[tcp:tcp + 13])
    flags = data[tcp + 13]
    pay = tot - ihl - (off >> 4) * 4
    rows.append(f"{t} {addr[2]} {tot} {src}:{sp}>{dst}:{dp} {flags:02x} {seq} {ack} {pay}")
with open(out, "w") as f:
    f.write("\n".join(rows) + "\n")
