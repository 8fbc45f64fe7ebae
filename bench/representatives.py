#!/usr/bin/env python3
"""How far `--representatives` (one simulated chip per class of symmetric chips) is from the full
simulation of every chip, beside how far the full simulation's own symmetric chips are from each
other (the step-end spread its summary reports), and what each mode costs. Run by hand; the
figures go to docs/model.md.

Usage: python3 bench/representatives.py [--tpusim build/tpusim] [--quick]

A case prints: step time (training) or collective time of both modes, their difference, the full
run's spread of the cores' step ends or the chips' collective ends (both relative to the full
time), and the wall seconds and peak MB of both.
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


def training(binary, workload, preset, topology, sets, representatives):
    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", f"workloads/examples/{workload}.json", "--hw", preset, "--topology", topology,
                "--set", "workload.training.steps=2", "--trace", "none", "-o", f"{tmp}/out"]
        for s in sets:
            args += ["--set", s]
        if representatives:
            args.append("--representatives")
        _, wall, mb = timed(binary, args)
        return json.loads(Path(f"{tmp}/out/summary.json").read_text()), wall, mb


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tpusim", default=str(ROOT / "build" / "tpusim"))
    parser.add_argument("--quick", action="store_true", help="the first three training cases only, no collectives")
    a = parser.parse_args()
    print(f"{'case':58} {'full ms':>9} {'repr ms':>9} {'diff':>7} {'spread':>7} {'full s':>7} {'repr s':>7} {'full MB':>8} {'repr MB':>8}")
    for workload, preset, topology, sets in QUICK if a.quick else TRAINING:
        full, full_s, full_mb = training(a.tpusim, workload, preset, topology, sets, False)
        rep, rep_s, rep_mb = training(a.tpusim, workload, preset, topology, sets, True)
        name = f"{workload} {preset} {topology} {' '.join(s.split('.')[-1] for s in sets)}"
        if full["status"] != "ok":
            print(f"{name:58} {full['status']}")
            continue
        f, r = full["step_time_s"], rep["step_time_s"]
        spread = full["step_end_spread"]["spread_s"]
        print(f"{name:58} {f * 1e3:9.3f} {r * 1e3:9.3f} {100 * (r - f) / f:+6.2f}% {100 * spread / f:6.2f}% "
              f"{full_s:7.2f} {rep_s:7.2f} {full_mb:8.0f} {rep_mb:8.0f}")
    if a.quick:
        return
    for preset, topology, algorithm in COLLECTIVES:
        base = ["collective", "--bytes", "1073741824", "--hw", preset, "--topology", topology, "--algorithm", algorithm, "--json"]
        out, full_s, full_mb = timed(a.tpusim, base)
        f, spread = json.loads(out)["time_s"], json.loads(out)["chip_end_spread_s"]
        out, rep_s, rep_mb = timed(a.tpusim, base + ["--representatives"])
        r = json.loads(out)["time_s"]
        name = f"all-reduce 1 GiB {preset} {topology} {algorithm}"
        print(f"{name:58} {f * 1e3:9.3f} {r * 1e3:9.3f} {100 * (r - f) / f:+6.2f}% {100 * spread / f:6.2f}% "
              f"{full_s:7.2f} {rep_s:7.2f} {full_mb:8.0f} {rep_mb:8.0f}")


if __name__ == "__main__":
    main()
