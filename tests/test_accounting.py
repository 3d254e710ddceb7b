"""Byte accounting per worker per step (spec §10), from the model shapes of spec §3 alone."""

import math
import subprocess
import sys

import pytest

from trainer.config import RunConfig
from trainer.variants.accounting import byte_accounting, index_bytes


def model_shapes(vocab: int, block: int, layers: int, width: int) -> dict[str, tuple[int, ...]]:
    """Parameter shapes in registration order (spec §3): tied embeddings, no biases."""
    shapes = {"wte.weight": (vocab, width), "wpe.weight": (block, width)}
    for i in range(layers):
        shapes[f"blocks.{i}.ln1.weight"] = (width,)
        shapes[f"blocks.{i}.attn.qkv.weight"] = (3 * width, width)
        shapes[f"blocks.{i}.attn.proj.weight"] = (width, width)
        shapes[f"blocks.{i}.ln2.weight"] = (width,)
        shapes[f"blocks.{i}.fc.weight"] = (4 * width, width)
        shapes[f"blocks.{i}.out.weight"] = (width, 4 * width)
    shapes["ln_f.weight"] = (width,)
    return shapes


GPU = model_shapes(4096, 256, 8, 384)
SHAKESPEARE = model_shapes(128, 128, 4, 128)
CPU_TINYSTORIES = model_shapes(4096, 256, 6, 192)


def acct(shapes, workers=8, **cfg):
    return byte_accounting(shapes, RunConfig(**cfg), workers)


def test_parameter_counts_of_section_3():
    assert sum(math.prod(s) for s in GPU.values()) == 15_833_472
    assert sum(math.prod(s) for s in SHAKESPEARE.values()) == 820_352
    assert sum(math.prod(s) for s in CPU_TINYSTORIES.values()) == 3_492_288


def test_gpu_profile_bytes():
    a = acct(GPU, variant="adamw")
    assert (a.payload_bytes, a.dense_bytes, a.payload_int64_bytes) == (31_666_944,) * 3
    assert a.wire_bytes == 55_417_152.0 and isinstance(a.wire_bytes, float)
    assert (a.collective, a.reducible) == ("all_reduce", True)

    b = acct(GPU, variant="topk", chunk_mode="2d", chunk=64)
    assert b.payload_bytes == 3_957_960
    assert b.wire_bytes == 27_705_720
    assert b.payload_int64_bytes == 9_895_920
    assert (b.collective, b.reducible) == ("all_gather", False)
    assert b.payload_int64_bytes / b.payload_bytes == pytest.approx(2.5, rel=1e-3)
    assert round(b.dense_bytes / b.payload_bytes, 1) == 8.0
    assert b.dense_bytes / b.payload_bytes == pytest.approx(8.000825, rel=1e-6)

    for variant, mode, chunk in [
        ("band", "2d", 64),
        ("band", "1d", 256),
        ("band", "1d", 64),
        ("calib", "2d", 64),
        ("optics", "1d", 256),
    ]:
        c = acct(GPU, variant=variant, chunk_mode=mode, chunk=chunk)
        assert c.payload_bytes == c.payload_int64_bytes == 1_979_184, (variant, mode, chunk)
        assert c.wire_bytes == 13_854_288
        assert c.dense_bytes / c.payload_bytes == 16.0
        assert (c.collective, c.reducible) == ("all_gather", True)


def test_switch_variant_reduces_in_the_network():
    e = acct(GPU, variant="optics_switch", chunk_mode="1d", chunk=256)
    assert e.payload_bytes == 1_979_184
    assert (e.collective, e.reducible) == ("reduce_at_switch", True)
    assert e.wire_bytes == e.payload_bytes


def test_small_profiles():
    a = acct(SHAKESPEARE, variant="adamw")
    assert (a.dense_bytes, a.wire_bytes) == (1_640_704, 2_871_232.0)
    band = acct(SHAKESPEARE, variant="band", chunk_mode="2d", chunk=64)
    assert (band.payload_bytes, band.wire_bytes) == (102_544, 717_808)
    assert acct(SHAKESPEARE, variant="optics", chunk_mode="1d", chunk=256).payload_bytes == 102_544
    assert acct(SHAKESPEARE, variant="topk", chunk_mode="2d", chunk=64).payload_bytes == 205_016

    cpu_a = acct(CPU_TINYSTORIES, variant="adamw")
    assert (cpu_a.dense_bytes, cpu_a.wire_bytes) == (6_984_576, 12_223_008.0)
    assert acct(CPU_TINYSTORIES, variant="band").payload_bytes == 436_536
    cpu_b = acct(CPU_TINYSTORIES, variant="topk", chunk_mode="2d", chunk=64)
    assert (cpu_b.payload_bytes, cpu_b.payload_int64_bytes, cpu_b.wire_bytes) == (
        872_916,
        2_182_680,
        6_110_412,
    )


def test_workers_enter_the_wire_only():
    two = acct(SHAKESPEARE, workers=2, variant="band")
    assert two.payload_bytes == 102_544 and two.wire_bytes == 102_544
    assert acct(SHAKESPEARE, workers=2, variant="adamw").wire_bytes == 1_640_704.0


@pytest.mark.parametrize(
    ("m", "nbytes"),
    [(1, 1), (2, 1), (64, 1), (256, 1), (257, 2), (4096, 2), (65536, 2), (65537, 3)],
)
def test_index_bytes(m, nbytes):
    assert index_bytes(m) == nbytes


def test_unknown_variant_is_rejected():
    with pytest.raises(ValueError, match="variant"):
        acct(SHAKESPEARE, variant="sgd")


def test_accounting_imports_without_torch():
    """Byte counts need only shapes, so the simulator side can use them without torch."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from trainer.variants.accounting import byte_accounting\n"
        "from trainer.config import RunConfig\n"
        "print(byte_accounting({'w': (128, 128)}, RunConfig(), 8).payload_bytes)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2048"
