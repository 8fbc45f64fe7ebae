#!/usr/bin/env python3
"""Asymmetric pods (issue 39's targets), run by hand; the figures go to docs/model.md.

Usage: python3 bench/asymmetric_pod.py [--tpusim build/tpusim] [--baseline OTHER_TPUSIM]
                                       [--repeat 1] [--only NAME ...]

A slow chip or a link that is down breaks the symmetry of these slices: they fold only by the
symmetries that keep it (reflections through it), or not at all (`--all-chips`), so they measure
the partly folded and the full simulation. Prints wall seconds and peak MB (GNU time) of each
case, beside the baseline build's when one is given (run alternately: the machine is shared, and
only figures taken side by side compare), with the issue's target where it names one.
"""
import argparse
import statistics

from pod_scale import ROOT, measure

SLOW_CHIP = ["--set", 'hw.slow_chips=[{"chip": 0, "core_freq_scale": 0.9}]']
RESNET = ["run", "workloads/examples/resnet50.json", "--hw", "tpu_v4", "--set", "workload.training.per_replica_batch=8",
          "--trace", "none"]
# name: (arguments, target wall seconds or None, target peak MB or None)
CASES = {
    "resnet50 v4 8x8x8 slow chip, 2 steps": (RESNET + ["--topology", "8x8x8", "--set", "workload.training.steps=2"]
                                              + SLOW_CHIP, None, None),
    "resnet50 v4 16x16x16 slow chip, 1 step": (RESNET + ["--topology", "16x16x16", "--set", "workload.training.steps=1"]
                                                + SLOW_CHIP, 60, 4096),
    "bert_large_128 v5p 16x20x28, chip 0's x+ link down, 1 step": (
        ["run", "workloads/examples/bert_large_128.json", "--hw", "tpu_v5p", "--topology", "16x20x28", "--trace", "none",
         "--set", "workload.training.steps=1", "--set", 'hw.slow_links=[{"chip": 0, "direction": "x+", "bw_scale": 0}]'],
        300, None),
    "all-reduce 1 GiB v4 16x16x16 --all-chips": (["collective", "--bytes", "1073741824", "--hw", "tpu_v4", "--topology",
                                                  "16x16x16", "--all-chips"], None, None),
}


def describe(runs):
    if any(r is None for r in runs):
        return "refused"
    return f"{', '.join(f'{s:.1f}' for s, _ in runs)} s, {max(mb for _, mb in runs):.0f} MB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tpusim", default=str(ROOT / "build" / "tpusim"))
    parser.add_argument("--baseline", help="another build, run alternately with this one")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", nargs="*", help="case names (substrings) to run")
    a = parser.parse_args()
    for name, (args, target_s, target_mb) in CASES.items():
        if a.only and not any(o in name for o in a.only):
            continue
        runs, base_runs = [], []
        for _ in range(a.repeat):
            runs.append(measure(a.tpusim, args, refusal_ok=True))
            if a.baseline:
                base_runs.append(measure(a.baseline, args, refusal_ok=True))
        line = f"{name:42} {describe(runs)}"
        if target_s is not None:
            line += f" (target: at most {target_s} s" + (f" and {target_mb} MB)" if target_mb else ")")
        if base_runs:
            line += f"; baseline {describe(base_runs)}"
            if all(r is not None for r in runs + base_runs):
                ratio = statistics.median(s for s, _ in base_runs) / statistics.median(s for s, _ in runs)
                line += f", {ratio:.2f}x this build's time"
        print(line, flush=True)


if __name__ == "__main__":
    main()
