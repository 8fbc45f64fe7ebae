#!/usr/bin/env python3
"""tpusim against public measurements of real TPUs (tests/data/validation/public_set.json).

Runs every point's tpusim command, prints each point's error and the mean absolute error per
category, over every point and over the points no constant was fitted on (held out).

  python3 bench/validate.py                      the table
  python3 bench/validate.py --markdown           the tables of docs/validation/summary.md
  python3 bench/validate.py --check              exit 1 when a category's mean absolute error is
                                                 more than one point above the recorded figure
  python3 bench/validate.py --record             write the figures into the data file
  python3 bench/validate.py --only matmul,vector only these categories (or point ids)

Errors are (tpusim - measured) / measured. A time below the measurement, or a throughput above
it, is optimistic.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "validation", "public_set.json")
CATEGORIES = ["matmul", "vector", "collective", "hbm", "training"]
SINGLE_OPS = ["matmul", "vector", "collective"]
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
TOLERANCE_POINTS = 1.0  # how far a category's mean may grow over the recorded figure


def run_point(tpusim, point):
    """tpusim's figure for `point`, in the unit of its measurement."""
    command = point["tpusim"]
    metric = point["metric"]
    with tempfile.TemporaryDirectory(prefix="tpusim-validate-") as scratch:
        if command[0] == "run":
            out_dir = os.path.join(scratch, "out")  # a fresh directory inside a fresh one
            args = [tpusim] + command + ["--trace", "none", "-o", out_dir]
            done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
            with open(os.path.join(out_dir, "summary.json")) as f:
                result = json.load(f)
        else:
            args = [tpusim] + command + ["--json"]
            done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
            result = json.loads(done.stdout)
    value = result
    for key in metric.split("."):
        value = value[key]
    unit = point["measured"]["unit"]
    if unit in TIME_UNITS:
        if not metric.endswith("_s"):
            raise ValueError(f"{point['id']}: metric {metric} is not a time in seconds")
        return value / TIME_UNITS[unit]
    return value


def optimistic(point, error):
    is_time = point["measured"]["unit"] in TIME_UNITS
    return error < 0 if is_time else error > 0


def mean_abs(errors):
    return sum(abs(e) for e in errors) / len(errors) if errors else None


def summarize(points, results):
    """Per category: (points, mean abs error %, held-out points, held-out mean abs error %)."""
    table = {}
    for category in CATEGORIES + ["single_ops"]:
        members = SINGLE_OPS if category == "single_ops" else [category]
        chosen = [p for p in points if p["category"] in members]
        if not chosen:
            continue
        errors = [results[p["id"]] for p in chosen]
        held = [results[p["id"]] for p in chosen if not p.get("fitted_for")]
        table[category] = {
            "points": len(chosen),
            "mean_abs_error_pct": round(mean_abs(errors), 2),
            "max_abs_error_pct": round(max(abs(e) for e in errors), 2),
            "held_out_points": len(held),
            "held_out_mean_abs_error_pct": round(mean_abs(held), 2) if held else None,
        }
    return table


def fmt_value(v):
    return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tpusim", default=os.path.join(ROOT, "build", "tpusim"))
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--only", default="", help="comma-separated categories or point ids")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()

    with open(args.data) as f:
        data = json.load(f)
    points = data["points"]
    if args.only:
        wanted = set(args.only.split(","))
        points = [p for p in points if p["category"] in wanted or p["id"] in wanted]
    ids = [p["id"] for p in points]
    if len(set(ids)) != len(ids):
        sys.exit("validate: two points share an id")

    figures = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {p["id"]: pool.submit(run_point, args.tpusim, p) for p in points}
        for p in points:
            figures[p["id"]] = futures[p["id"]].result()
    errors = {p["id"]: 100.0 * (figures[p["id"]] - p["measured"]["value"]) / p["measured"]["value"] for p in points}
    table = summarize(points, errors)

    rows = []
    for p in points:
        e = errors[p["id"]]
        rows.append([p["id"], p["category"], p["generation"], f"{fmt_value(p['measured']['value'])} {p['measured']['unit']}",
                     f"{fmt_value(figures[p['id']])} {p['measured']['unit']}", f"{e:+.1f}%", "optimistic" if optimistic(p, e) else "pessimistic",
                     "fit" if p.get("fitted_for") else ""])
    header = ["point", "category", "hardware", "measured", "tpusim", "error", "direction", ""]
    if args.markdown:
        print("| " + " | ".join(header[:-1] + ["fitted on"]) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        print()
        print("| category | points | mean abs error | max abs error | held-out points | held-out mean abs error |")
        print("|---|---:|---:|---:|---:|---:|")
        for c, t in table.items():
            held = "-" if t["held_out_mean_abs_error_pct"] is None else f"{t['held_out_mean_abs_error_pct']:.1f}%"
            print(f"| {c} | {t['points']} | {t['mean_abs_error_pct']:.1f}% | {t['max_abs_error_pct']:.1f}% | "
                  f"{t['held_out_points']} | {held} |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for r in [header] + rows:
            print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip())
        print()
        for c, t in table.items():
            held = "-" if t["held_out_mean_abs_error_pct"] is None else f"{t['held_out_mean_abs_error_pct']:.1f}%"
            print(f"{c:<11} {t['points']:>3} points  mean |error| {t['mean_abs_error_pct']:5.1f}%  max {t['max_abs_error_pct']:5.1f}%"
                  f"  held out: {t['held_out_points']} points, {held}")

    if args.record:
        if args.only:
            sys.exit("validate: --record needs every point (no --only)")
        data["recorded"] = {c: t["mean_abs_error_pct"] for c, t in table.items()}
        with open(args.data, "w") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
    if args.check:
        recorded = data.get("recorded", {})
        worse = [f"{c}: {t['mean_abs_error_pct']:.2f}% against {recorded[c]:.2f}% recorded"
                 for c, t in table.items() if c in recorded and t["mean_abs_error_pct"] > recorded[c] + TOLERANCE_POINTS]
        if worse:
            print("validate: the mean error grew by more than one point: " + "; ".join(worse), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
