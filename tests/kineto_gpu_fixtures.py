"""A small GPU Kineto trace whose device figures can be worked by hand (issue 42): the tests of
the device timeline (tests/test_kineto_device.py) build it with the quirk under test.

Each step, on the device (microseconds from the step's first kernel; streams 7 compute, 20 and
21 communication):

    stream 7   forward [0, 2000)  backward [2000, 4000) [4000, 6000)     optimiser [9000, 9500)
    stream 20                            all-reduce 1 [4000, 7000)
    stream 21                                         all-reduce 2 [6000, 8500)

so, in a device step of `device_period` (>= 9500) us: communication [4000, 8500) = 4500 (5500
of kernel time: the two streams overlap), compute [0, 6000) + [9000, 9500) = 6500, hidden
2000, exposed 2500, optimiser 500, idle device_period - 9000; the all-reduces' inputs are done
at 4000 and 6000, backward runs [2000, 6000). The host
launches them from ProfilerStep spans of `host_period - 100` us, every `host_period` us; the
device runs step k from `lag + k * device_period`.
"""

from typing import Any

FORWARD, BACKWARD = "aten::linear", "autograd::engine::evaluate_function: AddmmBackward0"
RCCL = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
# (host op around the launch, host offset as a share of the step, device start, end, stream,
# which all-reduce: 0 none)
LAYOUT = (
    (FORWARD, 0.02, 0, 2000, 7, 0),
    (BACKWARD, 0.22, 2000, 4000, 7, 0),
    (BACKWARD, 0.50, 4000, 6000, 7, 0),
    (None, 0.30, 4000, 7000, 20, 1),  # launched inside all-reduce 1's ops
    (None, 0.55, 6000, 8500, 21, 2),
    ("Optimizer.step#SGD.step", 0.80, 9000, 9500, 7, 0),
)
ELEMENTS = (1000, 500)


def make_gpu_profile(
    steps: int = 3,
    host_period: float = 10_100.0,
    device_period: float = 10_100.0,
    lag: float = 0.0,
    comm_kernel: str = NCCL,
    shapes: bool = True,
    gpu_marks: str | None = None,
    flows: bool = False,
    sliver: bool = False,
) -> dict[str, Any]:
    """The trace as torch.profiler writes it. gpu_marks: None, "short" (0.02 ms ProfilerStep
    annotations mid-step, as some ROCm traces have) or "full" (covering each device step);
    flows: kernels tied to launches by ac2g arrows, not `correlation`; sliver: a 0.02 ms
    duplicate of each host ProfilerStep span and a zero-length one."""
    events: list[dict[str, Any]] = []
    correlation = 100

    def add(name: str, cat: str, ts: float, dur: float, pid: int, tid: int, **args: Any) -> None:
        events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
             "args": args}
        )  # fmt: skip

    for k in range(steps):
        host = 1_000_000.0 + k * host_period
        span = host_period - 100
        device = 1_000_000.0 + lag + k * device_period
        add(f"ProfilerStep#{k + 1}", "user_annotation", host, span, 1, 1)
        if sliver:
            add(f"ProfilerStep#{k + 1}", "user_annotation", host + 5, 20, 1, 1)
            add(f"ProfilerStep#{k + 1}", "user_annotation", host + 7, 0, 1, 1)
        for op, share, start, end, stream, reduce in LAYOUT:
            at = host + share * span
            correlation += 1
            if reduce:
                size = ELEMENTS[reduce - 1]
                rpc = {"Collective name": "allreduce", "Group size": 2}
                nccl: dict[str, Any] = {}
                if shapes:
                    rpc |= {"In msg nelems": size, "dtype": "Float"}
                    nccl = {"Input Dims": [[size]], "Input type": ["float"]}
                add("c10d::allreduce_", "cpu_op", at - 30, 80, 1, 1)
                add("record_param_comms", "cpu_op", at - 20, 60, 1, 1, **rpc)
                add("nccl:all_reduce", "user_annotation", at - 10, 40, 1, 1, **nccl)
            else:
                add(op, "user_annotation" if op.startswith("Opt") else "cpu_op", at - 10, 40, 1, 1)
            add("cudaLaunchKernel", "cuda_runtime", at, 5, 1, 1, correlation=correlation)
            name = comm_kernel if reduce else f"gemm_{k}_{start}"
            kernel_args: dict[str, Any] = {"stream": stream}
            if flows:
                arrow = {"cat": "ac2g", "name": "ac2g", "id": correlation}
                events.append({**arrow, "ph": "s", "pid": 1, "tid": 1, "ts": at})
                events.append(
                    {**arrow, "ph": "f", "pid": 0, "tid": stream, "ts": device + start, "bp": "e"}
                )
            else:
                kernel_args["correlation"] = correlation
            add(name, "kernel", device + start, end - start, 0, stream, **kernel_args)
        if gpu_marks == "short":
            add(f"ProfilerStep#{k + 1}", "gpu_user_annotation", device + 2500, 18, 0, 7)
        elif gpu_marks == "full":
            add(f"ProfilerStep#{k + 1}", "gpu_user_annotation", device, device_period, 0, 7)
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
        "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}],
        "traceEvents": events,
    }
