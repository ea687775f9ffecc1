"""One TCP stream over a lab rail: how long N bytes take after the link idled.

server: python idle_send.py serve PORT          (in the receiving host's namespace)
client: python idle_send.py ADDR PORT CC N      (cc: bbr or cubic, set on the socket)
The client warms the stream up (64 x N back to back), then for each idle length in turn,
20 rounds of: sleep(idle), send N, wait for the server's 1-byte reply. Prints the median
time per idle (ms, the reply's one-way trip included) and N at the rail's rate for scale.
"""
import socket
import statistics
import sys
import time


def serve(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(4)
    ls.settimeout(120)
    while True:
        c, _ = ls.accept()
        c.settimeout(30)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n = int(c.recv(16).decode().strip())
        buf = bytearray(1 << 20)
        try:
            while True:
                got = 0
                while got < n:
                    k = c.recv_into(buf, min(len(buf), n - got))
                    if not k:
                        raise EOFError
                    got += k
                c.sendall(b"!")
        except (EOFError, ConnectionError):
            c.close()


def client(addr, port, cc, n, idles=(0.0, 0.5e-3, 1.5e-3, 3e-3, 6e-3), rounds=20):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(30)
    s.connect((addr, port))
    s.sendall(f"{n:<16d}".encode())
    data = b"x" * n

    def once():
        t0 = time.perf_counter()
        s.sendall(data)
        if s.recv(1) != b"!":
            raise EOFError
        return time.perf_counter() - t0

    for _ in range(64):
        once()
    res = {i: [] for i in idles}
    for _ in range(rounds):  # interleaved: every idle in every round
        for i in idles:
            if i:
                time.sleep(i)
            res[i].append(once())
    return {i: statistics.median(v) for i, v in res.items()}


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        addr, port, cc, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
        med = client(addr, port, cc, n)
        print(f"cc={cc} n={n} " + " ".join(f"idle{i * 1e3:g}ms={t * 1e3:.3f}" for i, t in med.items()))
