"""TCP across the 2-site testbed's shaped WAN: one flow, then two in opposite directions.

Why: on the 2-site testbed transitsim underpredicts the flat ring's 1-4 MiB points by 14-20 %
while a single flow across the same WAN reaches tbf's rate (payload share 0.94). A ring over two
sites puts one flow on each direction of the WAN at once, so each flow's ACKs wait in the other
direction's tbf queue behind its data. This measures that directly: ring-step-like transfers
(send a chunk, wait for the receiver's 1-byte go-ahead, repeat), first one flow (host 0 -> 2),
then two at once (0 -> 2 and 3 -> 1), each step's time as a ratio of the chunk at the WAN's
payload rate measured in the same run by the single flow's median step. Needs root and network
namespaces; every transfer is bounded in time, and the testbed is torn down on exit.

    python benchmarks/bench_testbed_wan.py [--host-rate "1 Gb/s"] [--wan-rate "50 Mb/s"]
        [--chunk "1 MiB"] [--steps 8] [--queue "50 ms" "20 ms" "5 ms"]
"""

import argparse
import statistics
import subprocess
import sys
import time

from transitsim.base.units import parse_bytes, parse_rate_bps, parse_time_s
from transitsim.testbed.netns import Shaping, Testbed, cleanup_leftovers

PORT = 29611
TIMEOUT_S = 120.0

RECEIVER = """
import socket, sys
port, chunk, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", port))
server.listen(1)
server.settimeout(30)
conn, _ = server.accept()
for _ in range(steps):
    got = 0
    while got < chunk:
        data = conn.recv(1 << 20)
        if not data:
            sys.exit(1)
        got += len(data)
    conn.sendall(b"k")
"""

SENDER = """
import socket, sys, time
address, port, chunk, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for attempt in range(50):
    try:
        conn = socket.create_connection((address, port), timeout=30)
        break
    except OSError:
        time.sleep(0.1)
payload = b"x" * chunk
for _ in range(steps):
    start = time.perf_counter()
    conn.sendall(payload)
    conn.recv(1)
    print(f"{time.perf_counter() - start:.6f}")
"""


def transfers(testbed: Testbed, pairs: list[tuple[int, int]], chunk: int, steps: int) -> list:
    """Per pair (src, dst), its step times, the pairs running at once."""
    receivers, senders = [], []
    for k, (_, dst) in enumerate(pairs):
        argv = [sys.executable, "-c", RECEIVER, str(PORT + k), str(chunk), str(steps)]
        receivers.append(subprocess.Popen(testbed.exec_argv(dst, argv)))
    time.sleep(0.3)
    for k, (src, dst) in enumerate(pairs):
        argv = [sys.executable, "-c", SENDER, testbed.address(dst), str(PORT + k), str(chunk)]
        argv.append(str(steps))
        senders.append(subprocess.Popen(testbed.exec_argv(src, argv), stdout=subprocess.PIPE))
    times = []
    try:
        for sender in senders:
            out, _ = sender.communicate(timeout=TIMEOUT_S)
            times.append([float(line) for line in out.split()])
        for receiver in receivers:
            receiver.wait(timeout=TIMEOUT_S)
    finally:
        for process in senders + receivers:
            if process.poll() is None:
                process.kill()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-rate", default="1 Gb/s")
    parser.add_argument("--wan-rate", default="50 Mb/s")
    parser.add_argument("--chunk", default="1 MiB")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--queue", nargs="+", default=["50 ms", "20 ms", "5 ms"])
    args = parser.parse_args()
    host_bps, wan_bps = parse_rate_bps(args.host_rate), parse_rate_bps(args.wan_rate)
    chunk, steps = parse_bytes(args.chunk), max(2, min(args.steps, 50))
    with open("/proc/loadavg") as handle:
        print(f"load average (1 min) before: {handle.read().split()[0]}; 2 cores")
    cleanup_leftovers()
    for queue in args.queue:
        wan = Shaping(wan_bps, Shaping.for_rate(wan_bps).burst_bytes, parse_time_s(queue))
        with Testbed(4, Shaping.for_rate(host_bps), sites=2, wan_shaping=wan) as testbed:
            (alone,) = transfers(testbed, [(0, 2)], chunk, steps)
            both = transfers(testbed, [(0, 2), (3, 1)], chunk, steps)
        base = statistics.median(alone[1:])  # the first step also opens the window
        print(
            f"WAN {args.wan_rate}, tbf queue {queue}, host links {args.host_rate}, "
            f"{args.chunk} steps x {steps}: one flow {base:.4f} s a step "
            f"({chunk * 8 / base / wan_bps:.1%} of the WAN rate)"
        )
        for name, times in zip(("0 -> 2", "3 -> 1"), both, strict=True):
            ratios = [t / base for t in times[1:]]
            print(
                f"  two opposite flows, {name}: median {statistics.median(ratios):.3f}x, "
                f"mean {statistics.mean(ratios):.3f}x, slowest {max(ratios):.3f}x the lone flow"
            )
    with open("/proc/loadavg") as handle:
        print(f"load average (1 min) after: {handle.read().split()[0]}")


if __name__ == "__main__":
    main()
