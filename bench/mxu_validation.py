#!/usr/bin/env python3
"""Prints the tables of docs/validation/mxu.md: tpusim's MXU model against SCALE-Sim (recorded in
tests/data/scalesim_ws_gemm.csv). Measured TPU matmuls are in bench/validate.py.

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


if __name__ == "__main__":
    print("## SCALE-Sim\n")
    scalesim_table()
