#!/usr/bin/env python3
"""Prints the tables of docs/validation/ici.md: tpusim collectives against alpha-beta closed forms
(peers.md 4.2) and against collectives measured on real TPUs (the JAX scaling book).

Usage: python3 bench/ici_validation.py [build/tpusim]
"""
import tempfile
from pathlib import Path

from tpusim_json import run


def collective(*args):
    return run("collective", *args)


def closed_forms(hw):
    # peers.md 4.2: 100 MB all-reduce over 16 chips, 45 GB/s per direction, 1 us per hop.
    rows = [
        ("A. 1-D unidirectional ring, p=16", "16", "ring", 4.1967e-3),
        ("B. 1-D bidirectional ring, p=16", "16", "bidir_ring", 2.1133e-3),
        ("C. 4x4 torus, axis by axis, bidirectional", "4x4", "torus", 2.0953e-3),
        ("D. 4x4 torus, both axes at once", "4x4", "torus_all_axes", 1.0537e-3),
    ]
    print("| case | peers.md (no gamma) | tpusim closed form | tpusim simulated | simulated vs peers.md |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, topo, algo, ref in rows:
        c = collective("--bytes", 100000000, "--hw", hw, "--topology", topo, "--algorithm", algo)
        print(f"| {name} | {ref * 1e3:.4f} ms | {c['alpha_beta_s'] * 1e3:.4f} ms | {c['time_s'] * 1e3:.4f} ms | "
              f"{100 * (c['time_s'] - ref) / ref:+.2f}% |")


MEASURED = [
    # (what, tpusim args, measured seconds, the book's own estimate)
    ("v5e, AllGather of 34 MB (8.4 MB per chip) over an axis of 4 without wraparound",
     ["--op", "all-gather", "--bytes", 34000000, "--hw", "tpu_v5e", "--topology", "4x4", "--group", "x",
      "--algorithm", "torus"], 680e-6, "377 µs ideal, 560 µs without wraparound"),
    ("v5e, AllGather of 128 KiB (32 kB per chip) over the same axis",
     ["--op", "all-gather", "--bytes", 131072, "--hw", "tpu_v5e", "--topology", "4x4", "--group", "x",
      "--algorithm", "torus"], 8e-6, "about 3 µs (3 hops)"),
    ("v2, ReduceScatter of a 134 MB shard over 2 chips (one hop)",
     ["--op", "reduce-scatter", "--bytes", 134217728, "--hw", "tpu_v2", "--topology", "2x1", "--algorithm", "torus"],
     1.13e-3, "about 1.1 ms"),
]


def measured():
    print("| collective | measured | scaling book's estimate | tpusim | error |")
    print("| --- | ---: | --- | ---: | ---: |")
    for what, args, seconds, estimate in MEASURED:
        c = collective(*args)
        t = c["time_s"]
        print(f"| {what} | {seconds * 1e6:.0f} µs | {estimate} | {t * 1e6:.1f} µs | {100 * (t - seconds) / seconds:+.1f}% |")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        hw = Path(d) / "wrapped.json"
        hw.write_text('{"base": "tpu_v5e", "name": "v5e_wrapped", "ici": {"wraparound": "always"}, "slice": {"shapes": []}}')
        print("## Closed forms\n")
        closed_forms(str(hw))
    print("\n## Measured\n")
    measured()
