#!/usr/bin/env python3
"""tpusim against public measurements of real TPUs (tests/data/validation/public_set.json).

Runs every point's tpusim command, prints each point's error and the mean absolute error per
category, over every point and over the points no constant was fitted on (held out).

  python3 bench/validate.py                      the table
  python3 bench/validate.py --markdown           the tables of docs/validation/summary.md
  python3 bench/validate.py --check              exit 1 when a category's mean absolute error is
                                                 more than one point above the recorded figure
  python3 bench/validate.py --record             write the figures into the data file
  python3 bench/validate.py --only matmul,vector only these categories (or point ids, or a
                                                 category of one generation: training:tpu_v4)
  python3 bench/validate.py --only X --save-runs DIR
                                                 run the points and keep each one's figure in DIR
  python3 bench/validate.py --from-runs DIR      the table from the figures kept in DIR, running
                                                 nothing (CTest runs the points in groups, in
                                                 parallel, then checks them all this way)

The evaluation's host time (workload.training.eval.host_overhead_s) adds to a block's time and
nothing else, so its least-squares value and every point's leave-one-out error follow from the
same runs: the script prints them below the tables.

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
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "validation", "public_set.json")
CATEGORIES = ["matmul", "vector", "collective", "hbm", "training"]
SINGLE_OPS = ["matmul", "vector", "collective"]
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
TOLERANCE_POINTS = 1.0  # how far a category's mean may grow over the recorded figure


EVAL_HOST = "workload.training.eval.host_overhead_s"
FIT_ROUNDING_S = 0.005  # the points set the fitted host time rounded to 0.01 s


def kept_run_path(runs_dir, point):
    return os.path.join(runs_dir, point["id"] + ".json")


def save_run(runs_dir, point, figure, summary, seconds):
    """Keeps `point`'s figure, and what the evaluation's fit reads of its summary, in runs_dir."""
    kept = {"id": point["id"], "tpusim": point["tpusim"], "figure": figure, "seconds": round(seconds, 1),
            "summary": None if summary is None else {k: summary[k] for k in ("step_time_s", "eval", "validation") if k in summary}}
    os.makedirs(runs_dir, exist_ok=True)
    path = kept_run_path(runs_dir, point)
    with open(path + ".tmp", "w") as f:
        json.dump(kept, f, indent=1)
    os.replace(path + ".tmp", path)


def load_run(runs_dir, point):
    """`point`'s figure and summary as save_run kept them; exits naming the point when there is
    none, or when it was run with another command than the data file now gives."""
    try:
        with open(kept_run_path(runs_dir, point)) as f:
            kept = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"validate: {point['id']}: no kept run in {runs_dir} ({e}); its group failed or did not run")
    if kept.get("tpusim") != point["tpusim"]:
        sys.exit(f"validate: {point['id']}: the run kept in {runs_dir} used another command than the data file gives")
    return kept["figure"], kept["summary"]


def selected(point, wanted):
    return point["category"] in wanted or point["id"] in wanted or f"{point['category']}:{point['generation']}" in wanted


def run_point(tpusim, point):
    """tpusim's figure for `point`, in the unit of its measurement, and the run's summary.json
    (None for a single-op command)."""
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
    summary = result if command[0] == "run" else None
    value = result
    for key in metric.split("."):
        value = value[key]
    unit = point["measured"]["unit"]
    if unit in TIME_UNITS:
        if not metric.endswith("_s"):
            raise ValueError(f"{point['id']}: metric {metric} is not a time in seconds")
        return value / TIME_UNITS[unit], summary
    return value, summary


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


def set_value(point, key):
    """The value `point`'s command sets `key` to, or None."""
    prefix = key + "="
    values = [a[len(prefix):] for a in point["tpusim"] if a.startswith(prefix)]
    return float(values[-1]) if values else None


def eval_host_fit(points, figures, summaries):
    """The evaluation's host time by least squares over the points fitted on it, and each of those
    points' error with the time fitted on the others (leave-one-out).

    A block with evaluation lasts base + h (base: its training steps and the evaluation's forward
    passes, h the host time); the measurement gives the block's length K, so the block's relative
    error is 1 - (base + h) / K, linear in h, and its least-squares h is the mean of K - base
    weighted by 1 / K^2: the short blocks of large slices, where the host time matters, weigh most.
    The throughput's error at h is K / (base + h) - 1."""
    blocks = []
    for p in points:
        if EVAL_HOST not in p.get("fitted_for", []):
            continue
        s = summaries[p["id"]]
        h_run = set_value(p, EVAL_HOST)
        if s is None or "eval" not in s or h_run is None:
            raise ValueError(f"{p['id']}: fitted for {EVAL_HOST} but its run sets no evaluation host time")
        base = s["eval"]["every_steps"] * s["step_time_s"] + s["eval"]["device_time_s"]
        measured_block = figures[p["id"]] * (base + h_run) / p["measured"]["value"]
        blocks.append((p["id"], base, measured_block, h_run))
    if not blocks:
        return None

    def least_squares(chosen):
        weights = [1.0 / k ** 2 for _, _, k, _ in chosen]
        return sum(w * (k - base) for w, (_, base, k, _) in zip(weights, chosen)) / sum(weights)

    rows = []
    for b in blocks:
        h_others = least_squares([o for o in blocks if o is not b]) if len(blocks) > 1 else None
        _, base, k, h_run = b
        rows.append({"id": b[0], "implied_s": k - base, "error_pct": 100.0 * (k / (base + h_run) - 1),
                     "leave_one_out_s": h_others,
                     "leave_one_out_error_pct": None if h_others is None else 100.0 * (k / (base + h_others) - 1)})
    return {"value_s": least_squares(blocks), "run_with_s": sorted({b[3] for b in blocks}), "points": rows}


def others(row, key, pattern, alone):
    """`row`'s leave-one-out figure `key` in `pattern`, or `alone` when no other point was fitted."""
    return alone if row[key] is None else pattern.format(row[key])


def print_eval_host_fit(fit, markdown):
    run_with = ", ".join(f"{h:g} s" for h in fit["run_with_s"])
    loo = [r["leave_one_out_error_pct"] for r in fit["points"] if r["leave_one_out_error_pct"] is not None]
    print()
    print(f"{EVAL_HOST}: {fit['value_s']:.3f} s by least squares over the {len(fit['points'])} points fitted on it "
          f"(their commands set {run_with})")
    if markdown:
        print()
        print("| point | host time its block implies | error | fitted on the others | error with that |")
        print("|---|---:|---:|---:|---:|")
        for r in fit["points"]:
            print(f"| {r['id']} | {r['implied_s']:.2f} s | {r['error_pct']:+.1f}% | {others(r, 'leave_one_out_s', '{:.2f} s', '-')} | "
                  f"{others(r, 'leave_one_out_error_pct', '{:+.1f}%', '-')} |")
        print()
    else:
        for r in fit["points"]:
            fitted_on_others = others(r, "leave_one_out_s", "{:.2f} s: ", "none")
            error_with_that = others(r, "leave_one_out_error_pct", "{:+6.1f}%", "")
            print(f"  {r['id']:<34} implies {r['implied_s']:6.2f} s  error {r['error_pct']:+6.1f}%  "
                  f"fitted on the others {fitted_on_others}{error_with_that}")
    if loo:
        print(f"leave-one-out: mean |error| {mean_abs(loo):.1f}%, max {max(abs(e) for e in loo):.1f}%")
    stale = [h for h in fit["run_with_s"] if abs(h - fit["value_s"]) > FIT_ROUNDING_S]
    if stale:
        print(f"note: the commands set {', '.join(f'{h:g} s' for h in stale)}, more than {FIT_ROUNDING_S:g} s from "
              f"the fit: set {EVAL_HOST}={fit['value_s']:.2f} in the points fitted on it and run again")


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
    parser.add_argument("--save-runs", metavar="DIR", help="keep each point's figure in DIR")
    parser.add_argument("--from-runs", metavar="DIR", help="read the figures kept in DIR instead of running")
    args = parser.parse_args()

    with open(args.data) as f:
        data = json.load(f)
    points = data["points"]
    if args.only:
        wanted = set(args.only.split(","))
        points = [p for p in points if selected(p, wanted)]
        if not points:
            sys.exit(f"validate: --only {args.only}: no point is of these categories or has these ids")
    ids = [p["id"] for p in points]
    if len(set(ids)) != len(ids):
        sys.exit("validate: two points share an id")

    figures, summaries = {}, {}
    if args.from_runs:
        for p in points:
            figures[p["id"]], summaries[p["id"]] = load_run(args.from_runs, p)
    else:
        def timed_run(p):
            start = time.monotonic()
            figure, summary = run_point(args.tpusim, p)
            if args.save_runs:
                save_run(args.save_runs, p, figure, summary, time.monotonic() - start)
            return figure, summary

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {p["id"]: pool.submit(timed_run, p) for p in points}
            for p in points:
                figures[p["id"]], summaries[p["id"]] = futures[p["id"]].result()
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

    fit = eval_host_fit(points, figures, summaries)
    if fit:
        print_eval_host_fit(fit, args.markdown)

    # Each training point's kind (as its run's summary names it) and error: what every run of the
    # same kind reports as its error band (summary.json "validation").
    point_records = {p["id"]: {"kind": summaries[p["id"]]["validation"]["kind"], "error_pct": round(errors[p["id"]], 2),
                               "held_out": not p.get("fitted_for")}
                     for p in points if summaries.get(p["id"]) and "validation" in summaries[p["id"]]}
    if args.record:
        if args.only:
            sys.exit("validate: --record needs every point (no --only)")
        data["recorded"] = {c: t["mean_abs_error_pct"] for c, t in table.items()}
        data["recorded_points"] = point_records
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
        # The bands runs report must be today's: a point's error or kind moved from its record
        # means recording again (--record), so no run quotes a figure the model no longer gives.
        kept = data.get("recorded_points", {})
        moved = [f"{i}: {r['kind']}, {r['error_pct']:+.1f}% against {kept[i]['kind']}, {kept[i]['error_pct']:+.1f}% recorded"
                 for i, r in point_records.items()
                 if i in kept and (abs(r["error_pct"] - kept[i]["error_pct"]) > TOLERANCE_POINTS or r["kind"] != kept[i]["kind"])]
        missing = [i for i in point_records if i not in kept]
        if moved or missing:
            print("validate: the recorded error bands are out of date (run bench/validate.py --record): " +
                  "; ".join(moved + [f"{i}: not recorded" for i in missing]), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
