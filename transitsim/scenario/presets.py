"""Named networks, written exactly as a scenario would write them (YAML-shaped, explicit units).

A scenario says `networks: [2dc-wan]` or `{preset: 2dc-wan, wan_link: {rate: "400 Gb/s"}}`; the
CLI says `--network 2dc-wan`. Keeping presets in the scenario's own format means they go through
the same validation and unit parsing as user input (see `transitsim.scenario.network_preset`).
"""

import copy
from typing import Any

from transitsim.base.errors import TransitsimError

_RACK_LINK = {"rate": "200 Gb/s", "length": "3 m"}
_SWITCH = {"forwarding_latency": "500 ns"}

# One H100's NVLink 4 port to the NVSwitches: 18 links x 25 GB/s = 450 GB/s each way, the link.
NVLINK_H100 = {"rate": "450 GB/s", "latency": "1 us"}
# NCCL's ring all-reduce reaches about 370 GB/s bus bandwidth on 8 of them (nccl-tests, large
# messages), not 450: the GPU, not the wire, sets that pace. Its channels (CUDA blocks, each
# on an SM, moving data through its FIFO) and copy engines push about 370 GB/s each way, whatever
# the link could carry. On a GPU that is the host endpoint (NetworkSpec.host, `host:`): `rate`
# is the GPU's channel throughput cap each way (one endpoint a GPU: ranks_per_host 1, so each
# GPU's cap is its own; several ranks on one endpoint would share it, as processes sharing a
# GPU or a CPU host's kernel do), and `per_message` the fixed cost a GPU pays per message
# (kernel launch, a channel's step set-up), 0 here: the link's 1 us latency already holds
# NCCL's small-message cost. So the preset's 370 of 450 comes from the endpoint, not from a
# link efficiency (bus bandwidth = min(450, 370) GB/s for a large ring, as before).
GPU_ENDPOINT_H100 = {"rate": "370 GB/s"}
# NVLink SHARP (NVLS): the NVSwitches sum in the fabric; 8 H100s reach about 480 GB/s bus
# bandwidth, i.e. an algorithm bandwidth of 480 x 8 / (2 x 7) = 274.3 GB/s per GPU, well below
# the GPUs' 370: the in-switch reduction is what limits it. Its summing rate over all 8 ports
# (bytes in) is therefore 8 x 274.3 GB/s = 2,194 GB/s, calibrated on that one figure.
NVLS_SUM_RATE = "2194 GB/s"

# Cluster nodes that predict before any calibration (issue 44; docs/engine.md "Hardware presets",
# benchmarks/bench_presets.py against real nccl-tests tables). Each is a rail-optimised fabric
# (network/fabrics/rail.py): 8 GPUs a node on their NVSwitch, GPU g's NIC on rail g, in NCCL
# mode with NCCL's own tuner. Sources:
# - NVLink, each GPU each way: A100 NVLink 3, 12 links, 600 GB/s both ways (NVIDIA A100 datasheet);
#   H100 SXM NVLink 4, 18 links, 900 GB/s both ways (NVIDIA H100 datasheet).
# - The GPU endpoint (`host.rate`): what NCCL itself counts a GPU's NVLinks as moving, links x
#   its per-link figure (src/graph/topo.h of NCCL 2.30.7: SM80_NVLINK_BW 20.0 GB/s x 12 = 240;
#   SM90_NVLINK_BW 20.6 x 18 = 370.8): its channels, not the wire, set the pace.
# - NICs, one per GPU: DGX A100, 8 x ConnectX-6 HDR InfiniBand 200 Gb/s (DGX A100 datasheet);
#   DGX H100, 8 x ConnectX-7 NDR 400 Gb/s (DGX H100 datasheet); AWS p5.48xlarge, 3,200 Gb/s of
#   EFA (32 x 100 Gb/s) = 400 Gb/s a GPU (AWS p5 instance page).
# - CPUs (NCCL's LL cap across nodes reads the vendor): DGX A100 and p5 AMD EPYC, DGX H100 Intel
#   Xeon (the same datasheets).
# - 16 channels: NCCL's ring search finds one ring per NIC (8) and ncclTopoDupChannels
#   (src/graph/search.cc) doubles them.
# - NVLink SHARP (NVLS) on the H100 nodes' NVSwitches: NVLS_SUM_RATE above; the A100's NVSwitch
#   does not sum.
_NODE_SWITCH = {"forwarding_latency": "0 s"}
_NVLS_SWITCH = {
    "forwarding_latency": "0 s",
    "aggregator": True,
    "agg_slot_size": "4 MiB",
    "agg_rate": NVLS_SUM_RATE,
}


def _node(nodes: int, nvlink: str, gpu_rate: str, nic: str, gpu: str, cpu: str, nvls: bool):
    """A rail-optimised cluster of `nodes` 8-GPU nodes in NCCL mode (the sources above)."""
    return {
        "topology": "rail_optimised",
        "workers": 8 * nodes,
        "gpus_per_node": 8,
        "nvlink": {"rate": nvlink},
        "host": {"rate": gpu_rate},
        "host_link": {"rate": nic},
        "switch": _NVLS_SWITCH if nvls else _NODE_SWITCH,
        "nccl": {"channels": 16, "algorithm": "auto", "gpu": gpu, "cpu": cpu},
    }


def _cluster(what: str, nodes: int, **node: Any) -> dict[str, Any]:
    return {"description": f"{nodes} {what} node(s), NCCL mode", **_node(nodes, **node)}


_DGX_A100 = {"nvlink": "300 GB/s", "gpu_rate": "240 GB/s", "nic": "200 Gb/s", "gpu": "ampere",
             "cpu": "amd", "nvls": False}  # fmt: skip
_DGX_H100 = {"nvlink": "450 GB/s", "gpu_rate": "370.8 GB/s", "nic": "400 Gb/s", "gpu": "hopper",
             "cpu": "intel", "nvls": True}  # fmt: skip
_P5 = {**_DGX_H100, "cpu": "amd"}
_DGX_A100_TEXT = "DGX A100 (8 x A100, NVLink 3, 8 x HDR 200 Gb/s InfiniBand)"
_DGX_H100_TEXT = "DGX H100 (8 x H100, NVLink 4 + NVLS, 8 x NDR 400 Gb/s InfiniBand)"
_P5_TEXT = "AWS p5.48xlarge (8 x H100, NVLink 4 + NVLS, 3,200 Gb/s EFA)"

PRESETS: dict[str, dict[str, Any]] = {
    "dgx-a100": _cluster(_DGX_A100_TEXT, 1, **_DGX_A100),
    "dgx-a100x2": _cluster(_DGX_A100_TEXT, 2, **_DGX_A100),
    "dgx-h100": _cluster(_DGX_H100_TEXT, 1, **_DGX_H100),
    "dgx-h100x2": _cluster(_DGX_H100_TEXT, 2, **_DGX_H100),
    "p5": _cluster(_P5_TEXT, 1, **_P5),
    "p5x2": _cluster(_P5_TEXT, 2, **_P5),
    "8x200g-switch": {
        "description": "8 hosts on one switch, 200 Gb/s links (a single rack)",
        "topology": "switch",
        "workers": 8,
        "host_link": _RACK_LINK,
        "switch": _SWITCH,
    },
    "8x200g-pluggable": {
        "description": "8x200g-switch with optical-transform pluggables: 800 Gb/s host lanes, "
        "200 Gb/s line, 256-point transform at 1 G passes/s",
        "topology": "switch",
        "workers": 8,
        "host_link": _RACK_LINK,
        "pluggable": {
            "host_lane_rate": "800 Gb/s",
            "line_rate": "200 Gb/s",
            "transform": {"size": 256, "planes": 8, "rate": "1 GHz", "keep": 0.0625},
        },
        "switch": _SWITCH,
    },
    "8x200g-switch-sum": {
        "description": "8x200g-switch whose switch sums reducible payloads (in-network all-reduce)",
        "topology": "switch",
        "workers": 8,
        "host_link": _RACK_LINK,
        "switch": {
            "forwarding_latency": "500 ns",
            "aggregator": True,
            "agg_slots": 512,
            "agg_slot_size": "4 KiB",
            "agg_rate": "3.2 Tb/s",
        },
    },
    "64x400g-leaf-spine": {
        "description": "64 hosts, 8 per leaf, 400 Gb/s host links, 800 Gb/s leaf-spine uplinks",
        "topology": "leaf_spine",
        "workers": 64,
        "hosts_per_rack": 8,
        "host_link": {"rate": "400 Gb/s", "length": "3 m"},
        "spine_link": {"rate": "800 Gb/s", "length": "50 m"},
        "switch": _SWITCH,
    },
    "8xh100-nvlink": {
        "description": "8 H100s on NVSwitch: NVLink 4, 450 GB/s each way, each GPU's channels "
        "moving 370 GB/s each way (ring all-reduce ~370 GB/s bus bandwidth)",
        "topology": "switch",
        "workers": 8,
        "host_link": NVLINK_H100,
        "host": GPU_ENDPOINT_H100,
        "switch": {"forwarding_latency": "0 s"},
    },
    "8xh100-nvls": {
        "description": "8xh100-nvlink whose NVSwitches sum (NVLink SHARP): in-switch all-reduce "
        "~480 GB/s bus bandwidth, limited by the switch's summing rate",
        "topology": "switch",
        "workers": 8,
        "host_link": NVLINK_H100,
        "host": GPU_ENDPOINT_H100,
        "switch": {
            "forwarding_latency": "0 s",
            "aggregator": True,
            "agg_slot_size": "4 MiB",
            "agg_rate": NVLS_SUM_RATE,
        },
    },
    "2dc-wan": {
        "description": "16 hosts in 2 datacentres 1000 km apart, one 100 Gb/s WAN link each way",
        "topology": "datacentres",
        "workers": 16,
        "datacentres": 2,
        "host_link": _RACK_LINK,
        "wan_link": {"rate": "100 Gb/s", "length": "1000 km"},
        "wan_links": 1,
        "switch": _SWITCH,
    },
    "4dc-wan": {
        "description": "32 hosts in 4 datacentres 2000 km apart, 400 Gb/s WAN links",
        "topology": "datacentres",
        "workers": 32,
        "datacentres": 4,
        "host_link": _RACK_LINK,
        "wan_link": {"rate": "400 Gb/s", "length": "2000 km"},
        "wan_links": 1,
        "switch": _SWITCH,
    },
}


def preset_names() -> list[str]:
    """The names `--network` and `preset:` accept, sorted."""
    return sorted(PRESETS)


def preset_dict(name: str) -> dict[str, Any]:
    """A fresh copy of one preset's YAML-shaped description (safe to modify)."""
    if name not in PRESETS:
        known = ", ".join(preset_names())
        raise TransitsimError(f'unknown network preset "{name}" (known: {known})')
    return copy.deepcopy(PRESETS[name])
