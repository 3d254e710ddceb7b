"""Round-trip time between two testbed hosts: 1-byte TCP ping-pong (no torch), run in a namespace.

`python -m transitsim.testbed.probe serve ADDR PORT COUNT` answers COUNT pings and exits;
`python -m transitsim.testbed.probe ping ADDR PORT COUNT` prints the median round trip in
seconds. The kernel path (veth, bridge, qdisc, TCP, wake-ups on this loaded machine) is what a
gloo message also pays: there is no netem here, so this latency is measured, not injected.
"""

import socket
import statistics
import sys
import time

CONNECT_TRIES = 100


def serve(addr: str, port: int, count: int) -> None:
    with socket.create_server((addr, port)) as server:
        server.settimeout(30.0)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(30.0)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(count):
                if not conn.recv(1):
                    return
                conn.sendall(b"x")


def ping(addr: str, port: int, count: int) -> float:
    for _ in range(CONNECT_TRIES):
        try:
            conn = socket.create_connection((addr, port), timeout=30.0)
            break
        except OSError:
            time.sleep(0.05)
    else:
        raise SystemExit(f"probe: cannot reach {addr}:{port}")
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for _ in range(count):
            t0 = time.perf_counter()
            conn.sendall(b"x")
            if not conn.recv(1):
                break
            rtts.append(time.perf_counter() - t0)
    return statistics.median(rtts[len(rtts) // 10 :])  # the first pings warm the path


if __name__ == "__main__":
    mode, address, port_text, count_text = sys.argv[1:5]
    if mode == "serve":
        serve(address, int(port_text), int(count_text))
    else:
        print(f"{ping(address, int(port_text), int(count_text)):.9f}")
