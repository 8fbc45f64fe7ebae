#!/usr/bin/env python3
"""What simulating one chip per class of symmetric chips (the default) saves against simulating
every chip (`--all-chips`), and whether the two give the same outputs. Run by hand; the figures
go to docs/model.md.

Usage: python3 bench/representatives.py [--tpusim build/tpusim] [--quick]

A case prints: the step time (training) or the collective's time, whether the two modes' outputs
are identical apart from the `simulation` field (summary.json, or `collective --json`), and the
wall seconds and peak MB of both.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TRAINING = [  # (workload, preset, topology, extra --set)
    ("resnet50", "tpu_v4", "2x2x4", ["workload.training.per_replica_batch=32"]),
    ("resnet50", "tpu_v4", "4x4x4", ["workload.training.per_replica_batch=32"]),
    ("resnet50", "tpu_v4", "4x4x4", ["workload.training.per_replica_batch=32", "workload.training.all_reduce.algorithm=torus"]),
    ("bert_large_128", "tpu_v5p", "4x4x4", ["workload.training.per_replica_batch=16"]),
    ("gpt2_small", "tpu_v4", "4x4x8", ["workload.training.per_replica_batch=8"]),
    ("mlp_mnist", "tpu_v4", "4x4x4", []),
    ("resnet50", "tpu_v5e", "16x16", ["workload.training.per_replica_batch=32"]),
    ("resnet50", "tpu_v3", "32x32", ["workload.training.per_replica_batch=32"]),
    ("resnet50", "tpu_v4", "8x8x8", ["workload.training.per_replica_batch=32"]),
]
QUICK = TRAINING[:3]
COLLECTIVES = [  # (preset, topology, algorithm)
    ("tpu_v4", "4x4x4", "torus"),
    ("tpu_v4", "4x4x4", "bidir_ring"),
    ("tpu_v4", "4x4x4", "torus_all_axes"),
    ("tpu_v4", "8x8x8", "torus"),
    ("tpu_v4", "8x8x8", "torus_all_axes"),
    ("tpu_v5e", "16x16", "torus_all_axes"),
]


def timed(binary, args):
    """stdout, wall seconds and peak MB (GNU time) of one command."""
    done = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", binary, *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    line = [l for l in done.stderr.splitlines() if l.startswith("TIME ")][-1].split()
    return done.stdout, float(line[1]), int(line[2]) / 1024


def training(binary, workload, preset, topology, sets, all_chips):
    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", f"workloads/examples/{workload}.json", "--hw", preset, "--topology", topology,
                "--set", "workload.training.steps=2", "--trace", "none", "-o", f"{tmp}/out"]
        for s in sets:
            args += ["--set", s]
        if all_chips:
            args.append("--all-chips")
        _, wall, mb = timed(binary, args)
        return json.loads(Path(f"{tmp}/out/summary.json").read_text()), wall, mb


def identical(full, folded):
    """The two outputs agree apart from which chips ran."""
    full, folded = dict(full), dict(folded)
    full.pop("simulation", None)
    folded.pop("simulation", None)
    return json.dumps(full, sort_keys=True) == json.dumps(folded, sort_keys=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tpusim", default=str(ROOT / "build" / "tpusim"))
    parser.add_argument("--quick", action="store_true", help="the first three training cases only, no collectives")
    a = parser.parse_args()
    print(f"{'case':58} {'ms':>9} {'identical':>9} {'all s':>8} {'folded s':>8} {'all MB':>7} {'folded MB':>9} {'chips':>9}")

    def row(name, time_s, same, full_s, folded_s, full_mb, folded_mb, simulation, every_chip):
        chips = f"{simulation['chips_simulated']}/{every_chip['chips_simulated']}"
        print(f"{name:58} {time_s * 1e3:9.3f} {'yes' if same else 'NO':>9} {full_s:8.2f} {folded_s:8.2f} "
              f"{full_mb:7.0f} {folded_mb:9.0f} {chips:>9}")

    for workload, preset, topology, sets in QUICK if a.quick else TRAINING:
        full, full_s, full_mb = training(a.tpusim, workload, preset, topology, sets, True)
        folded, folded_s, folded_mb = training(a.tpusim, workload, preset, topology, sets, False)
        name = f"{workload} {preset} {topology} {' '.join(s.split('.')[-1] for s in sets)}"
        row(name, full["step_time_s"], identical(full, folded), full_s, folded_s, full_mb, folded_mb, folded["simulation"], full["simulation"])
    if a.quick:
        return
    for preset, topology, algorithm in COLLECTIVES:
        base = ["collective", "--bytes", "1073741824", "--hw", preset, "--topology", topology, "--algorithm", algorithm, "--json"]
        out, full_s, full_mb = timed(a.tpusim, base + ["--all-chips"])
        full = json.loads(out)
        out, folded_s, folded_mb = timed(a.tpusim, base)
        folded = json.loads(out)
        row(f"all-reduce 1 GiB {preset} {topology} {algorithm}", full["time_s"], identical(full, folded), full_s, folded_s,
            full_mb, folded_mb, folded["simulation"], full["simulation"])


if __name__ == "__main__":
    main()
