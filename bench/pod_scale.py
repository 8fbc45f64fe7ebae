#!/usr/bin/env python3
"""Pod-scale figures (issue 14's targets), run by hand; the figures go to docs/model.md.

Usage: python3 bench/pod_scale.py [--tpusim build/tpusim] [--baseline OTHER_TPUSIM] [--repeat 2]

Prints wall seconds and peak MB (GNU time) of: one ResNet-50 step (per_replica_batch 8) on v4
2x2x4 and 16x16x16 and their ratio; one BERT-large (seq 128) step on the full v5p pod 16x20x28;
a 1 GiB all-reduce on v4 16x16x16, beside the baseline build's when given; GPT-3 175B with FSDP
on one v6e-256 and on 16 over the DCN, and their ratio (run alternately,
since the machine is shared and only figures taken side by side compare).
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RESNET = ["run", "workloads/examples/resnet50.json", "--hw", "tpu_v4", "--set", "workload.training.per_replica_batch=8",
          "--set", "workload.training.steps=1", "--trace", "none"]
CASES = {
    "resnet50 v4 2x2x4": RESNET + ["--topology", "2x2x4"],
    "resnet50 v4 16x16x16": RESNET + ["--topology", "16x16x16"],
    "bert_large_128 v5p 16x20x28": ["run", "workloads/examples/bert_large_128.json", "--hw", "tpu_v5p", "--topology", "16x20x28",
                                    "--set", "workload.training.steps=1", "--trace", "none"],
    "all-reduce 1 GiB v4 16x16x16": ["collective", "--bytes", "1073741824", "--hw", "tpu_v4", "--topology", "16x16x16"],
}
# GPT-3 175B with FSDP on one v6e-256 and on 16 of them over the DCN (issue 38: one slice stands
# for all, so the 16 should cost what the one does).
GPT3_FSDP = ["run", "workloads/mlperf/gpt3_175b_mlperf.json", "--hw", "v6e-256", "--set", "workload.training.mesh.model=",
             "--set", "workload.training.mesh.sequence_parallel=false", "--set", "workload.training.mesh.collective_matmul=false",
             "--set", "workload.training.per_replica_batch=1", "--trace", "none"]
CASES["gpt3_175b fsdp v6e-256"] = GPT3_FSDP
CASES["gpt3_175b fsdp 16x v6e-256"] = GPT3_FSDP + ["--slices", "16"]


def measure(binary, args, refusal_ok=False):
    """Wall seconds and peak MB of one run; None when `refusal_ok` and tpusim refuses it (exit 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        command = ["/usr/bin/time", "-f", "TIME %e %M", binary, *args]
        if args[0] == "run":
            command += ["-o", f"{tmp}/out"]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if refusal_ok and done.returncode == 2:
            return None
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
        line = [l for l in done.stderr.splitlines() if l.startswith("TIME ")][-1].split()
        return float(line[1]), int(line[2]) / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tpusim", default=str(ROOT / "build" / "tpusim"))
    parser.add_argument("--baseline", help="another build, for the all-reduce")
    parser.add_argument("--repeat", type=int, default=2)
    a = parser.parse_args()
    medians = {}
    for name, args in CASES.items():
        runs, mbs, base_runs = [], [], []
        for _ in range(a.repeat):
            s, mb = measure(a.tpusim, args)
            runs.append(s)
            mbs.append(mb)
            if a.baseline and args[0] == "collective":
                base_runs.append(measure(a.baseline, args)[0])
        medians[name] = statistics.median(runs)
        line = f"{name:30} {', '.join(f'{s:.2f}' for s in runs)} s, {max(mbs):.0f} MB"
        if base_runs:
            line += (f"; baseline {', '.join(f'{s:.2f}' for s in base_runs)} s, "
                     f"{statistics.median(base_runs) / max(medians[name], 0.01):.0f}x slower")
        print(line, flush=True)
    print(f"16x16x16 / 2x2x4 wall time: {medians['resnet50 v4 16x16x16'] / medians['resnet50 v4 2x2x4']:.2f}")
    print(f"16 slices / 1 slice wall time: {medians['gpt3_175b fsdp 16x v6e-256'] / medians['gpt3_175b fsdp v6e-256']:.2f}")


if __name__ == "__main__":
    main()
