#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Records what llama.cpp's own ggml computes for the Q4_1, Q5_0 and Q5_1
weight types, as golden data for tests/test-kernels.c (documented in
tests/data/golden/README.md, "Q4_1 / Q5_0 / Q5_1 kernels").

    tools/make-quant-golden.py ORACLE_DIR GOLDEN_DIR

ORACLE_DIR holds node_modules/node-llama-cpp (3.21.1, see
tools/make-arch-golden.sh); its prebuilt linux-x64 libraries are called
through ctypes, nothing is compiled and nothing of them enters the tree:
- libggml-base.so: quantize_row_{q4_1,q5_0,q5_1}_ref, the quantizers
  llama-quantize uses without an importance matrix;
- libggml-cpu-haswell.so (the AVX2/FMA/F16C build): quantize_row_q8_0 and
  quantize_row_q8_1 (activations) and ggml_vec_dot_{q4_1_q8_1,q5_0_q8_0,
  q5_1_q8_1}. Every other x86-64 AVX2 variant of the package is run too and
  must give the same bytes and the same floats, bit for bit.

Inputs are deterministic (integer arithmetic, exact float conversions) and
include the cases with their own branches: a constant block (zero step), a
block of zeros, equal largest magnitudes of opposite sign, rounding ties.
Writes GOLDEN_DIR/ggml-legacy-quants.*.
"""
import ctypes
import json
import os
import struct
import sys

PACKAGE_VERSION = "3.21.1"
N, ROWS, TOKENS = 128, 16, 4   # values per row (4 blocks), weight rows, tokens
MASK64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


class Rng:
    def __init__(self, seed):
        self.state = seed

    def uniform(self):
        """Uniform in [-1, 1) on a 2^-23 grid: exact as a float32."""
        self.state, z = splitmix64(self.state)
        return ((z >> 40) - (1 << 23)) / float(1 << 23)

    def bell(self):
        """Sum of four uniforms: bell-shaped, exact in float32."""
        return self.uniform() + self.uniform() + self.uniform() + self.uniform()


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def make_weights():
    rng = Rng(20250601)
    w = []
    for r in range(ROWS):
        # Scales from 1e-3 to ~8 and, on odd rows, an offset: blocks not
        # centred on zero are what Q4_1/Q5_1's m is for.
        scale = 2.0 ** (r % 8 - 5) / 1.5
        offset = (r % 3 - 1) * 3 * scale if r % 2 else 0.0
        w.extend(f32(offset + scale * rng.bell()) for _ in range(N))
    row0 = w[:N]
    row0[0:32] = [0.75] * 32                            # constant: zero step
    row0[32:64] = [0.0] * 32                            # zeros
    row0[64:96] = [0.5 * j for j in range(32)]          # exact half steps
    row0[98], row0[105] = 2.0, -2.0                     # equal |max|, first wins
    w[:N] = row0
    return w


def make_activations():
    rng = Rng(777)
    x = [f32(2.0 * rng.bell()) for _ in range(TOKENS * N)]
    # Token 0, block 0: amax 127 makes the scale exactly 1, so 2.5, -3.5,
    # 0.5 are rounding ties (ggml's x86 build rounds them to even).
    x[0:8] = [127.0, 2.5, -3.5, 0.5, -0.5, 1.5, 100.25, -126.5]
    x[32:64] = [0.0] * 32                               # token 0, block 1: zeros
    return x


def floats(values):
    return (ctypes.c_float * len(values))(*values)


def load(bins, name):
    return ctypes.CDLL(os.path.join(bins, name), mode=ctypes.RTLD_GLOBAL)


def dots(cpu, fn, wq, wrow, xq, xrow):
    out = []
    f = getattr(cpu, fn)
    f.restype = None
    res = ctypes.c_float()
    for r in range(ROWS):
        for t in range(TOKENS):
            f(ctypes.c_int(N), ctypes.byref(res), ctypes.c_size_t(0),
              ctypes.c_void_p(ctypes.addressof(wq) + r * wrow), ctypes.c_size_t(0),
              ctypes.c_void_p(ctypes.addressof(xq) + t * xrow), ctypes.c_size_t(0),
              ctypes.c_int(1))
            out.append(res.value)
    return struct.pack("<%df" % len(out), *out)


def run_cpu(bins, variant, x):
    """Activation blocks and dot products from one libggml-cpu variant."""
    cpu = load(bins, "libggml-cpu-%s.so" % variant)
    cpu.ggml_cpu_init()  # fills the half -> float table the kernels read
    q8_0 = ctypes.create_string_buffer(TOKENS * N // 32 * 34)
    q8_1 = ctypes.create_string_buffer(TOKENS * N // 32 * 36)
    xs = floats(x)
    cpu.quantize_row_q8_0(xs, q8_0, ctypes.c_int64(TOKENS * N))
    cpu.quantize_row_q8_1(xs, q8_1, ctypes.c_int64(TOKENS * N))
    return cpu, q8_0, q8_1


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make-quant-golden.py ORACLE_DIR GOLDEN_DIR")
    oracle, golden = sys.argv[1:]
    pkg_dir = os.path.join(oracle, "node_modules", "node-llama-cpp")
    with open(os.path.join(pkg_dir, "package.json")) as f:
        version = json.load(f)["version"]
    if version != PACKAGE_VERSION:
        sys.exit("node-llama-cpp %s found, %s expected" % (version, PACKAGE_VERSION))
    bins = os.path.join(oracle, "node_modules", "@node-llama-cpp", "linux-x64", "bins",
                        "linux-x64")
    base = load(bins, "libggml-base.so")

    w, x = make_weights(), make_activations()
    ws = floats(w)
    quants = {}
    for name, block in (("q4_1", 20), ("q5_0", 22), ("q5_1", 24)):
        buf = ctypes.create_string_buffer(ROWS * N // 32 * block)
        getattr(base, "quantize_row_%s_ref" % name)(ws, buf, ctypes.c_int64(ROWS * N))
        quants[name] = (buf, N // 32 * block)

    def compute(variant):
        cpu, q8_0, q8_1 = run_cpu(bins, variant, x)
        d = b"".join((
            dots(cpu, "ggml_vec_dot_q4_1_q8_1", quants["q4_1"][0], quants["q4_1"][1], q8_1, N // 32 * 36),
            dots(cpu, "ggml_vec_dot_q5_0_q8_0", quants["q5_0"][0], quants["q5_0"][1], q8_0, N // 32 * 34),
            dots(cpu, "ggml_vec_dot_q5_1_q8_1", quants["q5_1"][0], quants["q5_1"][1], q8_1, N // 32 * 36),
        ))
        return q8_0.raw, q8_1.raw, d

    want = compute("haswell")
    # The AVX2 variants with AVX-VNNI / AVX-512 VNNI form the integer sums
    # with other instructions; the results must not move.
    flags = open("/proc/cpuinfo").read()
    for variant, need in (("alderlake", "avx_vnni"), ("skylakex", "avx512bw"),
                          ("icelake", "avx512_vnni"), ("zen4", "avx512_bf16"),
                          ("sapphirerapids", "amx_int8")):
        if need not in flags:
            print("skipping %s (this CPU has no %s)" % (variant, need))
            continue
        got = compute(variant)
        if got != want:
            sys.exit("libggml-cpu-%s.so differs from the haswell build" % variant)
        print("libggml-cpu-%s.so: identical" % variant)

    stem = os.path.join(golden, "ggml-legacy-quants")
    files = {
        "weights.f32": struct.pack("<%df" % len(w), *w),
        "acts.f32": struct.pack("<%df" % len(x), *x),
        "q4_1": quants["q4_1"][0].raw,
        "q5_0": quants["q5_0"][0].raw,
        "q5_1": quants["q5_1"][0].raw,
        "q8_0": want[0],
        "q8_1": want[1],
        "dots.f32": want[2],
    }
    for ext, data in files.items():
        with open("%s.%s" % (stem, ext), "wb") as f:
            f.write(data)
        print("%s.%s: %d bytes" % (stem, ext, len(data)))


if __name__ == "__main__":
    main()
