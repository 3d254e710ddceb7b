"""nccl-tests outputs for the tests: the real ones written by others, found and verified, and
made-up ones in nccl-tests' exact layout.

The real files are not in the repository (the workplace's rule: data brought in from other
repositories lives only under the steering repo's shared/; see tests/fixtures/nccl-tests/
README.md). `nccl_fixture` looks for one in tests/fixtures/nccl-tests/, then in
../shared/nccl-tests/ beside the clone (and its more/), checks its sha256, and fails the test
(naming the file) when ../shared/nccl-tests/ is there but does not hold it, so that nothing
real-data skips in CI; only a clone without ../shared skips them.

Every other test (the command's behaviour and options, malformed input, fuzzing) reads a
`Sweep`: an all_reduce sweep timed by transitsim's own model on known links (one per size
regime, as NCCL's protocol changes make), with a little seeded jitter, printed as nccl-tests
2.17 / 2.18 print it (command line, header, `#  Rank` lines, NCCL INFO noise, the
out-of-place / in-place columns, the footer), so CI covers them without the real files.
"""

import hashlib
import random
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pytest

from transitsim.calibrate import Link
from transitsim.calibrate.model import Shape, predict_s
from transitsim.calibrate.nccl_tests import busbw_factor

ROOT = Path(__file__).resolve().parents[1]
PLACES = (ROOT / "tests" / "fixtures" / "nccl-tests", ROOT.parent / "shared" / "nccl-tests")
SHA256 = {  # the files the tests were written for (tests/fixtures/nccl-tests/README.md)
    "alps-2x1-gh200-all_reduce.txt": (
        "d79499a6b77e518276ba72d2c9f9a2874e949c5ed399bec1aa26b8cf4767d601"
    ),
    "alps-2x4-gh200-all_reduce.txt": (
        "e60a4140aa0c629898f7188fdef0b00c8b446acec0285b233180a2759227f9d9"
    ),
    # ../shared/nccl-tests/more/ (its SOURCES.txt; licences beside them: MIT-0, BSD-3)
    "more/deepops-2xdgxa100-ib-all_reduce.txt": (
        "bfd7f30018c69294b14537c0104dabe57aa7720a575b80d12cfc90f801f0c8f5"
    ),
    "more/awsome-p5-awsbatch-8rank-all_reduce.txt": (
        "7d87c388cbc79747c9b798c9bf9b2039119ffef3d65e1dfa1eae9979d4a10887"
    ),
}
MIB = 1 << 20


def find_fixture(name: str) -> tuple[Path | None, str]:
    """(the verified file, "") or (None, why not): the first place holding `name` with the
    sha256 the tests were written for."""
    wrong = []
    for folder in PLACES:
        path = folder / name
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest == SHA256[name]:
                return path, ""
            wrong.append(f"{path} has sha256 {digest[:16]}..., not {SHA256[name][:16]}...")
    if wrong:
        return None, f"real nccl-tests output {name}: " + "; ".join(wrong)
    where = " nor ".join(str(p) for p in PLACES)
    return None, (
        f"real nccl-tests output {name} is in neither {where} (not in the repository: "
        "see tests/fixtures/nccl-tests/README.md)"
    )


def nccl_fixture(name: str) -> Path:
    """The real fixture's path; where ../shared/nccl-tests/ is there (CI has it) a missing or
    altered file fails the test, elsewhere it is skipped, saying which file."""
    path, reason = find_fixture(name)
    if path is None:
        if PLACES[-1].is_dir():
            pytest.fail(reason)
        pytest.skip(reason)
    return path


# nccl-tests' column headers: 2.17 prints #wrong 5 wide, 2.18 6 wide (src/common.cu)
_PLACES_LINE = (
    "#                                                              out-of-place"
    "                       in-place          "
)
_COLUMNS = {
    "2.17": (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)       ",
    ),
    "2.18": (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "             (us)  (GB/s)  (GB/s)         ",
    ),
}


def time_text(us: float, version: str) -> str:
    """The time column: 2.17 keeps 3-5 digits by size, 2.18 two decimals."""
    if version == "2.18":
        return f"{us:.2f}"
    return f"{us:.0f}" if us >= 10000 else f"{us:.1f}" if us >= 100 else f"{us:.2f}"


@dataclass(frozen=True)
class Sweep:
    """A made-up `all_reduce_perf -f 2` run: `hosts` x `per_host` ranks, sizes first..last,
    each size timed by transitsim's ring on one switch with the link of its regime (`links`
    maps the smallest size of a regime to its link), times jittered by up to +-`jitter`."""

    name: str
    hosts: int
    per_host: int
    first: int
    last: int
    links: dict[int, Link]
    jitter: float = 0.01
    seed: int = 0
    version: str = "2.17"
    indent: str = ""
    preamble: tuple[str, ...] = ()
    closing: tuple[str, ...] = ()
    host_names: tuple[str, ...] = field(default=("node-a017", "node-b203"))
    gpu: str = "NVIDIA H100 80GB HBM3"

    @property
    def ranks(self) -> int:
        return self.hosts * self.per_host

    @property
    def sizes(self) -> list[int]:
        out, size = [], self.first
        while size <= self.last:
            out.append(size)
            size *= 2
        return out

    def model_us(self, size: int) -> float:
        """transitsim's time for `size` on its regime's link, before jitter."""
        link = self.links[max(t for t in self.links if t <= size)]
        shape = Shape("switch", self.ranks, self.ranks)
        return predict_s("all_reduce", "ring_allreduce", shape, size, link) * 1e6

    @cached_property
    def times_us(self) -> dict[int, tuple[float, float]]:
        """size -> (out-of-place, in-place) microseconds, as measured (before printing)."""
        rng = random.Random(self.seed)
        out = {}
        for size in self.sizes:
            model = self.model_us(size)
            out[size] = tuple(model * (1 + rng.uniform(-self.jitter, self.jitter)) for _ in "oi")
        return out

    def printed_us(self, size: int, place: str = "out") -> float:
        """The time as the table prints it (what the parser reads back)."""
        return float(time_text(self.times_us[size][place == "in"], self.version))

    def _host(self, rank: int) -> str:
        return self.host_names[rank // self.per_host % len(self.host_names)]

    def _noise(self, rank: int, what: str) -> str:
        pid = 4100 + rank
        return f"{self._host(rank)}:{pid}:{pid} [{rank % self.per_host}] NCCL INFO {what}"

    def _row(self, size: int) -> str:
        wrong = 5 if self.version == "2.17" else 6
        row = f"{size:12d}  {size // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
        for us in self.times_us[size]:
            algbw = size / us / 1e3
            busbw = algbw * busbw_factor("all_reduce", self.ranks)
            row += f"  {time_text(us, self.version):>7}  {algbw:6.2f}  {busbw:6.2f}  {'0':>{wrong}}"
        return row

    def lines(self) -> list[str]:
        """The output's lines, before indentation."""
        perf = f"all_reduce_perf -b {self.first} -e {self.last} -f 2 -g 1"
        out = [f"$ mpirun -np {self.ranks} -npernode {self.per_host} ./build/{perf}"]
        if self.version == "2.18":
            out.append("# nccl-tests version 2.18.2 nccl-headers=22105 nccl-library=22105")
        out.append("# Collective test starting: all_reduce_perf")
        out.append(
            f"# nThread 1 nGpus 1 minBytes {self.first} maxBytes {self.last} step: 2(factor) "
            "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0"
            + (" unalign: 0" if self.version == "2.18" else "")
        )
        out += ["#", "# Using devices"]
        for rank in range(self.ranks):
            out.append(
                f"#  Rank {rank:2d} Group  0 Pid {4100 + rank:6d} on {self._host(rank):>10} "
                f"device {rank % self.per_host:2d} [0000:{rank % self.per_host + 4:02x}:00] "
                f"{self.gpu}"
            )
        out.append(self._noise(0, "Bootstrap : Using eth0:10.0.0.1<0>"))
        out.append("NCCL version 2.21.5+cuda12.4")
        out.append(self._noise(self.ranks - 1, "NET/Socket : Using [0]eth0:10.0.0.2<0>"))
        out += ["#", _PLACES_LINE, *_COLUMNS[self.version]]
        sizes = self.sizes
        for index, size in enumerate(sizes):
            out.append(self._row(size))
            if index == len(sizes) // 2:
                out.append(self._noise(1, "Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM"))
        busbw = [float(part) for s in sizes for part in self._row(s).split()[7::4]]
        out += [
            "# Out of bounds values : 0 OK",
            f"# Avg bus bandwidth    : {sum(busbw) / len(busbw):g} ",
            "#",
            "# Collective test concluded: all_reduce_perf",
            self._noise(0, f"comm 0x55d0c1a0 rank 0 nranks {self.ranks} - Destroy COMPLETE"),
        ]
        return out

    def text(self) -> str:
        body = [f"{self.indent}{line}" for line in self.lines()]
        return "\n".join([*self.preamble, *body, *self.closing]) + "\n"

    def write(self, folder: Path) -> Path:
        """The output as a file named after the sweep, in `folder` (a test's tmp_path)."""
        path = folder / self.name
        path.write_text(self.text())
        return path


# Three made-up runs shaped like the real ones (the link values are this file's, not measured)
H100_2X8 = Sweep(  # 16 ranks, 8 B .. 8 GiB, a faster, higher-latency regime from 32 MiB
    "h100-2x8-all_reduce.txt",
    hosts=2,
    per_host=8,
    first=8,
    last=8 << 30,
    links={0: Link(3.0e11, 2.5e-6), 32 * MIB: Link(2.7e12, 1.5e-5)},
    seed=1,
    preamble=("## NCCL TEST RESULT", "", "> export NCCL_DEBUG=INFO \\", ">   NCCL_IB_HCA=mlx5", ""),
)
GH200_2X4 = Sweep(  # 8 ranks, 8 B .. 128 MiB, as a console block of a markdown page
    "gh200-2x4-all_reduce.txt",
    hosts=2,
    per_host=4,
    first=8,
    last=128 * MIB,
    links={0: Link(2.0e11, 3e-6), 8 * MIB: Link(1.1e12, 1.4e-5)},
    seed=2,
    indent="    ",
    preamble=("Two nodes:", "", "    ```console"),
    closing=("    ```",),
    host_names=("nid005471", "nid005487"),
    gpu="NVIDIA GH200 120GB",
)
GH200_2X1 = Sweep(  # 2 ranks on two hosts, 1 .. 128 MiB, nccl-tests 2.18's layout, noisier
    "gh200-2x1-all_reduce.txt",
    hosts=2,
    per_host=1,
    first=MIB,
    last=128 * MIB,
    links={0: Link(2.1e11, 7e-5)},
    jitter=0.03,
    seed=3,
    version="2.18",
    host_names=("nid007106", "nid007109"),
    gpu="NVIDIA GH200 120GB",
)
SWEEPS = {sweep.name: sweep for sweep in (H100_2X8, GH200_2X4, GH200_2X1)}
