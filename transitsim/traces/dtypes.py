"""Bytes per element of every type PyTorch's profiler writes (issue 45): all of c10's scalar types.

A profile names a tensor's element type three ways: `Input type` is the C++ type's demangled name
(`float`, `long int`, `c10::Half`, `c10::complex<c10::Half>`, `unsigned short`, ...),
`record_param_comms`' `dtype` is the ScalarType's name (`Float`, `Long`, `ComplexHalf`,
`UInt16`, ...), and a user's `--dtype` is often Python's (`torch.float32`, `bfloat16`). All
three are looked up here, case and the `c10::`/`torch.` qualifiers aside. A type not listed is
unknown (None): the importer refuses it by name rather than count it as 0 bytes.
"""

import re

_SIZES: dict[int, tuple[str, ...]] = {
    1: (
        # 8-bit integers and bool
        "unsigned char", "signed char", "char", "byte", "uint8", "int8", "uint8_t", "int8_t",
        "bool",
        # quantized and bit-packed types
        "qint8", "quint8", "quint4x2", "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8",
        # 8-bit and packed 4-bit floats
        "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu",
        "float4_e2m1fn_x2",
        # sub-byte integers (stored a byte each)
        *(f"uint{n}" for n in range(1, 8)), *(f"int{n}" for n in range(1, 8)),
        *(f"dummy_uint1_7_t<{n}>" for n in range(1, 8)),
        *(f"dummy_int1_7_t<{n}>" for n in range(1, 8)),
    ),
    2: (
        "short", "short int", "signed short", "signed short int", "int16", "int16_t",
        "unsigned short", "unsigned short int", "short unsigned int", "uint16", "uint16_t",
        "half", "float16", "bfloat16", "bits16",
    ),
    4: (
        "int", "signed int", "signed", "int32", "int32_t", "unsigned int", "unsigned",
        "uint32", "uint32_t", "float", "float32", "qint32", "complexhalf", "complex32",
        "chalf", "complex<half>",
    ),
    8: (
        "long", "long int", "signed long", "long long", "long long int", "signed long long",
        "int64", "int64_t", "unsigned long", "long unsigned int", "unsigned long int",
        "unsigned long long", "long long unsigned int", "unsigned long long int", "uint64",
        "uint64_t", "double", "float64", "complexfloat", "complex64", "cfloat",
        "complex<float>",
    ),
    16: ("complexdouble", "complex128", "cdouble", "complex<double>"),
}  # fmt: skip
DTYPE_BYTES: dict[str, int] = {name: size for size, names in _SIZES.items() for name in names}
_SPACES = re.compile(r"\s+")


def element_size(name: object) -> int | None:
    """Bytes per element of a profiled element type in any of its spellings, else None."""
    if not isinstance(name, str):
        return None
    key = _SPACES.sub(" ", name.strip().lower()).replace("c10::", "").removeprefix("torch.")
    return DTYPE_BYTES.get(key)
