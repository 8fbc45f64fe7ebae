#!/usr/bin/env python3
"""Wall time and peak memory of the simulations with speed targets (the issues' figures), run by
hand: the machine is shared, so a figure means something beside another build's measured in the
same run, not alone.

Usage: python3 bench/speed.py [--tpusim build/tpusim] [--baseline OTHER_TPUSIM] [--repeat 3] [CASE...]

With --baseline, each run of this build alternates with one of the baseline's, and the table
gives both medians and their ratio. Cases: bert_v5e_256, resnet_v4_16, allreduce_v4_4096. Every
chip is simulated (`--all-chips`, for builds that have it), since the cases measure the speed of
the simulation itself: by default a symmetric slice simulates one chip per class.
"""
import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name: (target seconds, arguments after the binary)
CASES = {
    "bert_v5e_256": (10.0, ["run", "workloads/examples/bert_large_128.json", "--hw", "tpu_v5e", "--topology", "16x16",
                            "--set", "workload.training.steps=1", "--trace", "none"]),
    "resnet_v4_16": (2.0, ["run", "workloads/examples/resnet50.json", "--hw", "tpu_v4", "--topology", "2x2x4",
                           "--set", "workload.training.per_replica_batch=0",
                           "--set", "workload.training.global_batch=1024",
                           "--set", "workload.training.steps=1", "--trace", "none"]),
    "allreduce_v4_4096": (None, ["collective", "--bytes", "1073741824", "--hw", "tpu_v4", "--topology", "16x16x16"]),
}


def all_chips(binary, command):
    """["--all-chips"] where `binary` has it (builds before symmetric slices simulate every chip)."""
    help_text = subprocess.run([binary, command, "--help"], capture_output=True, text=True).stdout
    return ["--all-chips"] if "--all-chips" in help_text else []


def measure(binary, args, out_dir):
    """Seconds of wall time and MB of peak resident memory of one run (GNU time's %e and %M)."""
    command = ["/usr/bin/time", "-f", "TIME %e %M", binary, *args, *all_chips(binary, args[0])]
    if args[0] == "run":
        command += ["-o", str(out_dir), "--force"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    seconds, kbytes = re.search(r"TIME ([0-9.]+) ([0-9]+)", done.stderr).groups()
    return float(seconds), int(kbytes) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tpusim", default=str(ROOT / "build" / "tpusim"))
    parser.add_argument("--baseline", help="another tpusim binary to alternate with")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("cases", nargs="*", default=list(CASES))
    options = parser.parse_args()
    unknown = [c for c in options.cases if c not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    if not Path("/usr/bin/time").exists():
        sys.exit("needs GNU time (/usr/bin/time; Debian package time)")

    binaries = [options.tpusim] + ([options.baseline] if options.baseline else [])
    header = "| case | target | this build: runs (s) | median | peak MB |"
    if options.baseline:
        header += " baseline: runs (s) | median | ratio |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    with tempfile.TemporaryDirectory() as tmp:
        for name in options.cases:
            target, args = CASES[name]
            runs = {b: [] for b in binaries}
            peak = 0.0
            for _ in range(options.repeat):
                for b in binaries:
                    seconds, mbytes = measure(b, args, Path(tmp) / name)
                    runs[b].append(seconds)
                    if b == options.tpusim:
                        peak = max(peak, mbytes)
            mine = statistics.median(runs[options.tpusim])
            row = (f"| {name} | {f'{target:g} s' if target else '-'} | "
                   f"{', '.join(f'{s:.2f}' for s in runs[options.tpusim])} | {mine:.2f} | {peak:.0f} |")
            if options.baseline:
                theirs = statistics.median(runs[options.baseline])
                row += f" {', '.join(f'{s:.2f}' for s in runs[options.baseline])} | {theirs:.2f} | {mine / theirs:.2f} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
