"""Checks the delayed-precision-reduction codecs against independent references: the files
test_codec wrote (input.f32 and each format decoded back to fp32) against PyTorch's own fp16 and
bf16 conversions (round to nearest even), and against fp8 E4M3 built here from its definition
(every code's value, nearest with ties to the even code, saturating at +-448, NaN kept).
Usage: codec_ref.py DIR"""
import sys

import numpy as np
import torch


def e4m3(x):
    codes = np.arange(0x7F)  # 0x00..0x7e: the non-negative finite values, ascending
    exp, mant = codes >> 3, codes & 7
    values = np.where(exp > 0, (1 + mant / 8) * 2.0 ** (exp - 7), mant * 2.0 ** -9)
    a = np.minimum(np.abs(x.astype(np.float64)), 448.0)
    hi = np.clip(np.searchsorted(values, a), 1, len(values) - 1)
    lo = hi - 1
    d_lo, d_hi = a - values[lo], values[hi] - a
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    out = np.copysign(values[pick], x).astype(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out)


def same(got, want):
    """Bit for bit, except that any NaN matches any NaN."""
    nan = np.isnan(got) & np.isnan(want)
    bits = got.view(np.uint32) == want.view(np.uint32)
    return nan | bits


def main(d):
    x = np.fromfile(f"{d}/input.f32", dtype=np.float32)
    t = torch.from_numpy(x.copy())
    refs = {"fp16": t.half().float().numpy(), "bf16": t.bfloat16().float().numpy(), "fp8": e4m3(x)}
    fails = 0
    for name, want in refs.items():
        got = np.fromfile(f"{d}/{name}.f32", dtype=np.float32)
        ok = same(got, want)
        if ok.all():
            print(f"ok   {name}: {len(x)} values equal the reference bit for bit")
        else:
            fails += 1
            bad = np.flatnonzero(~ok)
            print(f"FAIL {name}: {len(bad)} values differ, e.g. " +
                  ", ".join(f"{x[i]!r} -> {got[i]!r} (want {want[i]!r})" for i in bad[:4]))
    return fails


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)
