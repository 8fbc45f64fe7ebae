#!/usr/bin/env python3
"""Prints the tables of docs/validation/mxu.md: tpusim's MXU model against SCALE-Sim (recorded in
tests/data/scalesim_ws_gemm.csv) and against published TPU v5e matmul timings.

Usage: python3 bench/mxu_validation.py [build/tpusim]
"""
import csv

from tpusim_json import ROOT, run


def gemm(*args):
    return run("gemm", *args)


def scalesim_table():
    print("| shape | M | N | K | array | SCALE-Sim | tpusim compat | diff | tpusim compute-only | ratio to SCALE-Sim |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    worst = 0.0
    with open(ROOT / "tests" / "data" / "scalesim_ws_gemm.csv") as f:
        for row in csv.DictReader(f):
            array = f"{row['array_rows']}x{row['array_cols']}"
            common = (row["M"], row["N"], row["K"], "--hw", "tpu_v2", "--array", array, "--mxus", 1)
            compat = gemm(*common, "--scalesim-compat")["cycles"]
            ours = gemm(*common, "--compute-only")["cycles"]
            ref = int(row["scalesim_compute_cycles"])
            diff = (compat - ref) / ref
            worst = max(worst, abs(diff))
            print(f"| {row['shape']} | {row['M']} | {row['N']} | {row['K']} | {array} | {ref} | {compat} | "
                  f"{100 * diff:+.3f}% | {ours} | {ours / ref:.3f} |")
    print(f"\nLargest compat difference: {100 * worst:.3f}%")


# TPU v5e, bf16, from the JAX Pallas matmul guide (docs/pallas/tpu/matmul.ipynb, timeit of
# jax.block_until_ready over 100 trials, Python dispatch included).
PALLAS_V5E = [
    ("Pallas bm=bk=bn=128", 1024, "128x128x128", 0.00029766598949208854),
    ("Pallas bm=bk=bn=128", 4096, "128x128x128", 0.011771515250438824),
    ("Pallas bm=bk=bn=128", 8192, "128x128x128", 0.09183577066054567),
    ("Pallas bm=512 bk=bn=1024", 1024, "512x1024x1024", 0.00012708659982308746),
    ("Pallas bm=512 bk=bn=1024", 4096, "512x1024x1024", 0.00088908776990138),
    ("Pallas bm=512 bk=bn=1024", 8192, "512x1024x1024", 0.006099433819763363),
    ("XLA jnp.matmul", 1024, None, 0.00011943008983507753),
    ("XLA jnp.matmul", 4096, None, 0.0008272899803705514),
    ("XLA jnp.matmul", 8192, None, 0.006047147869830951),
]


def pallas_table():
    print("| kernel | shape | measured | tpusim | error | tpusim bound |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for kernel, size, block, measured in PALLAS_V5E:
        extra = ["--block", block] if block else []
        g = gemm(size, size, size, "--hw", "tpu_v5e", *extra)
        err = (g["time_s"] - measured) / measured
        print(f"| {kernel} | {size}³ | {measured * 1e6:.1f} µs | {g['time_s'] * 1e6:.1f} µs | {100 * err:+.1f}% | {g['bound']} |")


if __name__ == "__main__":
    print("## SCALE-Sim\n")
    scalesim_table()
    print("\n## TPU v5e (Pallas guide)\n")
    pallas_table()
