#!/usr/bin/env python3
"""Runs tpusim membench on every case DRAMsim3 was recorded on and prints both side by side.

    python3 bench/hbm_validation.py [--tpusim build/tpusim]

The peer's numbers are in tests/data/dramsim3_hbm2_results.json (docs/validation/hbm.md says how
they were made); tpusim runs on tests/data/dramsim3_hbm2_8gb_x128.json, the same organisation and
timings.
"""
import argparse
import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent


def membench(tpusim, case):
    cmd = [tpusim, "membench", "--hw", str(ROOT / "tests/data/dramsim3_hbm2_8gb_x128.json"),
           "--pattern", case["pattern"], "--bytes", str(case["bytes"]),
           "--request-bytes", str(case["request_bytes"]), "--requesters", str(case["requesters"]),
           "--outstanding", str(case["outstanding"]), "--json"]
    if case["pattern"] == "random":
        cmd += ["--footprint-bytes", str(case["footprint_bytes"])]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout), cmd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpusim", default=str(ROOT / "build/tpusim"))
    args = ap.parse_args()
    peer = json.loads((ROOT / "tests/data/dramsim3_hbm2_results.json").read_text())
    print("| pattern | request B | K x Q | DRAMsim3 GB/s | tpusim GB/s | error | DRAMsim3 avg/p99 ns | tpusim avg/p99 ns | row hits D3 / tpusim |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in peer["results"]:
        ours, _ = membench(args.tpusim, case)
        err = ours["bw_gbps"] / case["bw_gbps"] - 1
        print(f"| {case['pattern']} | {case['request_bytes']} | {case['requesters']} x {case['outstanding']} "
              f"| {case['bw_gbps']:.1f} | {ours['bw_gbps']:.1f} | {100 * err:+.1f}% "
              f"| {case['latency_avg_ns']:.0f} / {case['latency_p99_ns']:.0f} "
              f"| {ours['latency_avg_ns']:.0f} / {ours['latency_p99_ns']:.0f} "
              f"| {case['row_hit_rate']:.3f} / {ours['row_hit_rate']:.3f} |")


if __name__ == "__main__":
    main()
