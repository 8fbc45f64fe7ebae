#!/usr/bin/env python3
"""Runs tpusim membench on every case DRAMsim3 was recorded on and prints both side by side;
with --presets, what every preset's HBM achieves on streams and on random small requests.

    python3 bench/hbm_validation.py [--tpusim build/tpusim] [--presets]

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


PRESETS = ["tpu_v2", "tpu_v3", "tpu_v4", "tpu_v5e", "tpu_v5p", "tpu_v6e"]
# pattern, request bytes, bytes, requests in flight per requester (8 requesters): enough to
# saturate every preset's HBM, so the figures are the memory's, not the requesters'.
PRESET_CASES = [
    ("stream-read", 65536, 268435456, 64),
    ("stream-write", 65536, 268435456, 64),
    ("triad", 65536, 201326592, 64),
    ("random", 4096, 67108864, 64),
    ("random", 64, 16777216, 1024),
]


def presets(tpusim):
    print("| preset | peak GB/s | " + " | ".join(f"{p} {b} B" for p, b, _, _ in PRESET_CASES) + " | row hits random 64 B |")
    print("|---|---|" + "---|" * len(PRESET_CASES) + "---|")
    for hw in PRESETS:
        cells, hits = [], ""
        for pattern, request, total, outstanding in PRESET_CASES:
            cmd = [tpusim, "membench", "--hw", hw, "--pattern", pattern, "--bytes", str(total),
                   "--request-bytes", str(request), "--requesters", "8", "--outstanding", str(outstanding), "--json"]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            cells.append(f"{r['bw_gbps']:.0f} ({100 * r['fraction_of_peak']:.0f}%)")
            peak = r["peak_bw_gbps"]
            if pattern == "random" and request == 64:
                hits = f"{r['row_hit_rate']:.2f}"
        print(f"| {hw} | {peak:.0f} | " + " | ".join(cells) + f" | {hits} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpusim", default=str(ROOT / "build/tpusim"))
    ap.add_argument("--presets", action="store_true")
    args = ap.parse_args()
    if args.presets:
        presets(args.tpusim)
        return
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
