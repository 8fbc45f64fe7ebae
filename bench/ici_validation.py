#!/usr/bin/env python3
"""Prints the tables of docs/validation/ici.md: tpusim collectives against alpha-beta closed forms
(peers.md 4.2). Measured TPU collectives are in bench/validate.py.

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


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        hw = Path(d) / "wrapped.json"
        hw.write_text('{"base": "tpu_v5e", "name": "v5e_wrapped", "ici": {"wraparound": "always", "payload_efficiency": 1, "collective_start_ns": 0}, "slice": {"shapes": []}}')
        print("## Closed forms\n")
        closed_forms(str(hw))
