#!/usr/bin/env python3
"""tpusim against public measurements of real TPUs (tests/data/validation/public_set.json).

Runs every point's tpusim command, prints each point's error and the mean absolute error per
category, and the same leave-one-source-out: each point judged with every constant fitted on its
own source's points refitted without them (the headline, what a point outside the set can expect).

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

Leave one source out. A point's source is the repository (or site) its measurement comes from
(`source` up to its first '@', '#', ':' or space). The data file's `fitted_constants` say how each
constant is fitted and what it is without a fit: for a source, every constant fitted on one of its
points is refitted on the other sources' points, or, when none is left, falls back to its `prior`,
and that source's points are run again with it (`--set KEY=PRIOR`). Two kinds of constant refit
from the same runs, with no other run: the evaluation's host time
(workload.training.eval.host_overhead_s, `least_squares_eval_host`) adds to a block's time and
nothing else, and a program's launch or a collective's start (`least_squares_additive`) is paid
once on top of the rest of a single op's figure, which its run reports. The script prints their
least-squares values and each point's refit below the tables.

Predict first. A point whose `first_prediction` holds tpusim's figure made before its
measurement was read is also reported with that figure's error, on its own: what a user can expect
of a kind of run tpusim has not been checked on.

Errors are (tpusim - measured) / measured. A time below the measurement, or a throughput above
it, is optimistic.
"""
import argparse
import concurrent.futures
import json
import os
import re
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
EVAL_HOST_FIT = "least_squares_eval_host"  # the fit fitted_constants names for it
LOSO_SUFFIX = "@without-its-source"  # a point's run as a prediction of its source
ADDITIVE_FIT = "least_squares_additive"  # a constant paid once on top of the rest of a figure
SINGLE_OP_KEPT = ("time_s", "launch_overhead_s", "collective_start_s")
UNIT_NAMES = {1e-6: "us", 1e-9: "ns"}  # the units an additive constant is set in
FIT_ROUNDING_S = 0.005  # the points set the fitted host time rounded to 0.01 s


def source_of(point):
    """The repository (or site) `point`'s measurement comes from: what leave-one-source-out leaves out."""
    text = point["source"]
    if re.match(r"https?://", text):  # a site: its host and first path element
        return "/".join(re.sub(r"^https?://", "", text).split()[0].split("/")[:2])
    return re.split(r"[@#: ]", text, maxsplit=1)[0]


def check_fitted_constants(points, constants):
    """Exits when a point names a constant the data file does not describe, or a constant whose fit
    leave-one-source-out cannot redo."""
    for p in points:
        for name in p.get("fitted_for", []):
            if name not in constants:
                sys.exit(f"validate: {p['id']}: fitted_for names {name!r}, which fitted_constants does not describe")
    for name, c in constants.items():
        pool = [p["id"] for p in points if name in p.get("fitted_for", [])]
        if c["fit"] == "one_point" and len(pool) > 1:
            sys.exit(f"validate: {name} is fitted on one point but {len(pool)} name it ({', '.join(pool)}): "
                     "describe how to refit it on several")
        if c["fit"] not in ("one_point", EVAL_HOST_FIT, ADDITIVE_FIT):
            sys.exit(f"validate: {name}: no such fit {c['fit']!r} (one_point, {EVAL_HOST_FIT} or {ADDITIVE_FIT})")
        if not all(k in c for k in ("set", "prior")):
            sys.exit(f"validate: {name}: a fitted constant names the key it sets (set) and its prior")
        if c["fit"] == ADDITIVE_FIT and not all(k in c for k in ("paid_as", "metric", "unit_s", "rounded_to")):
            sys.exit(f"validate: {name}: an additive fit names what a run reports it paid (paid_as), the metric that pays it, "
                     "unit_s and rounded_to")
        if c["fit"] == ADDITIVE_FIT and c["unit_s"] not in UNIT_NAMES:
            sys.exit(f"validate: {name}: unit_s {c['unit_s']} is none of {sorted(UNIT_NAMES)}")
    for p in points:
        first = p.get("first_prediction")
        if first is not None and not all(k in first for k in ("value", "unit", "recorded_in")):
            sys.exit(f"validate: {p['id']}: a first_prediction holds its value, unit and the commit that recorded it (recorded_in)")


def loso_overrides(point, points, constants):
    """The `--set` arguments that run `point` as a prediction of its source: every constant fitted
    on that source's points alone, at its prior. Empty when the point needs no other run (no
    constant was fitted on its source, or only constants refitted analytically: the evaluation's
    host time and the additive ones)."""
    source = source_of(point)
    args = []
    for name, c in constants.items():
        pool = [p for p in points if name in p.get("fitted_for", [])]
        if c["fit"] != "one_point" or not any(source_of(p) == source for p in pool):
            continue
        if c.get("generation") and c["generation"] != point["generation"]:
            continue
        args += ["--set", f"{c['set']}={c['prior']:g}"]
    return args


def loso_point(point, points, constants):
    """`point` run as a prediction of its source (its command with loso_overrides), or None."""
    extra = loso_overrides(point, points, constants)
    if not extra:
        return None
    return dict(point, id=point["id"] + LOSO_SUFFIX, tpusim=point["tpusim"] + extra)


def kept_run_path(runs_dir, point):
    return os.path.join(runs_dir, point["id"] + ".json")


def save_run(runs_dir, point, figure, summary, seconds):
    """Keeps `point`'s figure, and what the evaluation's fit reads of its summary, in runs_dir."""
    kept = {"id": point["id"], "tpusim": point["tpusim"], "figure": figure, "seconds": round(seconds, 1),
            "summary": None if summary is None else {k: summary[k] for k in ("step_time_s", "eval", "validation") + SINGLE_OP_KEPT
                                                       if k in summary}}
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
    # A single op keeps the parts of its figure a refit moves (its device time and launch).
    summary = result if command[0] == "run" else {k: result[k] for k in SINGLE_OP_KEPT if k in result}
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


def summarize(points, errors, loso_errors):
    """Per category: points, mean and max absolute error as run, and the same leave-one-source-out."""
    table = {}
    for category in CATEGORIES + ["single_ops"]:
        members = SINGLE_OPS if category == "single_ops" else [category]
        chosen = [p["id"] for p in points if p["category"] in members]
        if not chosen:
            continue
        table[category] = {
            "points": len(chosen),
            "mean_abs_error_pct": round(mean_abs([errors[i] for i in chosen]), 2),
            "max_abs_error_pct": round(max(abs(errors[i]) for i in chosen), 2),
            "loso_mean_abs_error_pct": round(mean_abs([loso_errors[i] for i in chosen]), 2),
            "loso_max_abs_error_pct": round(max(abs(loso_errors[i]) for i in chosen), 2),
        }
    return table


def set_value(point, key):
    """The value `point`'s command sets `key` to, or None."""
    prefix = key + "="
    values = [a[len(prefix):] for a in point["tpusim"] if a.startswith(prefix)]
    return float(values[-1]) if values else None


def fit_by_source(rows, prior):
    """Least squares over relative errors, for a constant each row implies a value of (`implied`):
    the mean of those values weighted by 1 / `scale`^2 (the measured length the error is relative
    to), over every row and, for each row, over the other sources' rows (`prior` when there are
    none), kept in the row as `other_sources`."""
    def mean(chosen):
        weights = [1.0 / r["scale"] ** 2 for r in chosen]
        return sum(w * r["implied"] for w, r in zip(weights, chosen)) / sum(weights)

    for r in rows:
        others = [o for o in rows if o["source"] != r["source"]]
        r["other_sources"] = mean(others) if others else prior
    return mean(rows)


def eval_host_fit(points, figures, summaries, prior_s=None):
    """The evaluation's host time by least squares over the points fitted on it, and each of those
    points' error with the time fitted on the other sources' points (leave-one-source-out; at
    `prior_s` when no other source has any).

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
        blocks.append({"id": p["id"], "source": source_of(p), "base": base, "scale": measured_block,
                       "implied": measured_block - base, "h_run": h_run})
    if not blocks:
        return None
    value_s = fit_by_source(blocks, prior_s)
    rows = []
    for b in blocks:
        k, base, h_others = b["scale"], b["base"], b["other_sources"]
        rows.append({"id": b["id"], "source": b["source"], "implied_s": b["implied"], "error_pct": 100.0 * (k / (base + b["h_run"]) - 1),
                     "other_sources_s": h_others,
                     "other_sources_error_pct": None if h_others is None else 100.0 * (k / (base + h_others) - 1)})
    return {"value_s": value_s, "run_with_s": sorted({b["h_run"] for b in blocks}), "points": rows}


def additive_fit(name, constant, points, figures, summaries):
    """A constant every run of its points pays once, on top of the rest of their figure (a program's
    launch, a collective's start), by least squares over the points fitted on it, and each of
    those points' value fitted on the other sources' points (at its prior when no other source has
    any). Each point's run reports what it paid (`paid_as`, seconds), so each implies a value (its
    measurement less the rest of tpusim's figure) and the least-squares value over relative errors
    is the mean of those weighted by 1 / measurement^2."""
    rows = []
    for p in points:
        if name not in p.get("fitted_for", []):
            continue
        s = summaries.get(p["id"]) or {}
        if p["metric"] != constant["metric"] or constant["paid_as"] not in s or p["measured"]["unit"] not in TIME_UNITS:
            raise ValueError(f"{p['id']}: fitted for {name} but its run's {constant['metric']} does not say what it paid")
        unit_s = TIME_UNITS[p["measured"]["unit"]]
        measured_s = p["measured"]["value"] * unit_s
        rest_s = figures[p["id"]] * unit_s - s[constant["paid_as"]]
        rows.append({"id": p["id"], "source": source_of(p), "scale": measured_s, "implied": measured_s - rest_s,
                     "run_with_s": s[constant["paid_as"]]})
    if not rows:
        return None
    value_s = fit_by_source(rows, constant["prior"] * constant["unit_s"])
    points = [{"id": r["id"], "source": r["source"], "implied_s": r["implied"], "other_sources_s": r["other_sources"],
               "run_with_s": r["run_with_s"]} for r in rows]
    return {"name": name, "constant": constant, "value_s": value_s, "points": points}


def additive_refit_for(point, run_summary, fit):
    """What refitting `fit`'s constant without `point`'s source adds to its figure, in seconds (its
    run's summary gives what it paid), or None when the constant was not fitted on its source or
    its figure does not pay it."""
    c = fit["constant"]
    summary = run_summary or {}
    # A time that pays it, or a rate computed from such a time (a collective's bandwidth).
    pays = point["metric"] == c["metric"] if point["measured"]["unit"] in TIME_UNITS else c["metric"] in summary
    if not pays or c["paid_as"] not in summary:
        return None
    own = [r for r in fit["points"] if r["source"] == source_of(point)]
    if not own:
        return None
    return own[0]["other_sources_s"] - run_summary[c["paid_as"]]


def print_additive_fit(fit, markdown):
    unit_s = fit["constant"]["unit_s"]
    unit = UNIT_NAMES[unit_s]
    print()
    print(f"{fit['name']}: {fit['value_s'] / unit_s:.4g} {unit} by least squares over the {len(fit['points'])} points fitted on it")
    if markdown:
        print()
        print("| point | source | what it implies | fitted on the other sources |")
        print("|---|---|---:|---:|")
    for r in fit["points"]:
        if markdown:
            print(f"| {r['id']} | {r['source']} | {r['implied_s'] / unit_s:.4g} {unit} | {r['other_sources_s'] / unit_s:.4g} {unit} |")
        else:
            print(f"  {r['id']:<34} implies {r['implied_s'] / unit_s:8.4g} {unit}  fitted on the other sources "
                  f"{r['other_sources_s'] / unit_s:8.4g} {unit}")
    run_with = sorted({r["run_with_s"] for r in fit["points"]})
    # The presets carry the fit rounded (`rounded_to`, in the constant's unit): a note when it moved further.
    if any(abs(h - fit["value_s"]) > fit["constant"]["rounded_to"] * unit_s / 2 for h in run_with):
        if markdown:
            print()
        print(f"note: the presets set {', '.join(f'{h / unit_s:g} {unit}' for h in run_with)}, not the fit")


def others(row, key, pattern, alone):
    """`row`'s figure `key` fitted on the other sources, in `pattern`, or `alone` when none was fitted."""
    return alone if row[key] is None else pattern.format(row[key])


def print_eval_host_fit(fit, markdown):
    run_with = ", ".join(f"{h:g} s" for h in fit["run_with_s"])
    loso = [r["other_sources_error_pct"] for r in fit["points"] if r["other_sources_error_pct"] is not None]
    print()
    print(f"{EVAL_HOST}: {fit['value_s']:.3f} s by least squares over the {len(fit['points'])} points fitted on it "
          f"(their commands set {run_with})")
    if markdown:
        print()
        print("| point | source | host time its block implies | error | fitted on the other sources | error with that |")
        print("|---|---|---:|---:|---:|---:|")
        for r in fit["points"]:
            print(f"| {r['id']} | {r['source']} | {r['implied_s']:.2f} s | {r['error_pct']:+.1f}% | "
                  f"{others(r, 'other_sources_s', '{:.2f} s', '-')} | {others(r, 'other_sources_error_pct', '{:+.1f}%', '-')} |")
        print()
    else:
        for r in fit["points"]:
            fitted_on_others = others(r, "other_sources_s", "{:.2f} s: ", "none")
            error_with_that = others(r, "other_sources_error_pct", "{:+6.1f}%", "")
            print(f"  {r['id']:<34} implies {r['implied_s']:6.2f} s  error {r['error_pct']:+6.1f}%  "
                  f"fitted on the other sources {fitted_on_others}{error_with_that}")
    if loso:
        print(f"leave-one-source-out: mean |error| {mean_abs(loso):.1f}%, max {max(abs(e) for e in loso):.1f}%")
    stale = [h for h in fit["run_with_s"] if abs(h - fit["value_s"]) > FIT_ROUNDING_S]
    if stale:
        print(f"note: the commands set {', '.join(f'{h:g} s' for h in stale)}, more than {FIT_ROUNDING_S:g} s from "
              f"the fit: set {EVAL_HOST}={fit['value_s']:.2f} in the points fitted on it and run again")


def first_predictions(points, errors):
    """The points predicted before their measurements were read (`first_prediction`): each one's
    error as predicted and as run now."""
    rows = []
    for p in points:
        first = p.get("first_prediction")
        if not first:
            continue
        if first["unit"] != p["measured"]["unit"]:
            sys.exit(f"validate: {p['id']}: its first prediction is in {first['unit']}, its measurement in {p['measured']['unit']}")
        measured = p["measured"]["value"]
        rows.append({"id": p["id"], "predicted": first["value"], "unit": first["unit"], "recorded_in": first["recorded_in"],
                     "measured": measured, "error_pct": 100.0 * (first["value"] - measured) / measured, "now_pct": errors[p["id"]]})
    return rows


def print_first_predictions(rows, markdown):
    if not rows:
        return
    print()
    print(f"predicted before measured: {len(rows)} points, mean |error| {mean_abs([r['error_pct'] for r in rows]):.1f}% as "
          f"predicted, {mean_abs([r['now_pct'] for r in rows]):.1f}% now")
    if markdown:
        print()
        print("| point | predicted | recorded in | measured | error as predicted | error now |")
        print("|---|---:|---|---:|---:|---:|")
        for r in rows:
            print(f"| {r['id']} | {fmt_value(r['predicted'])} {r['unit']} | {r['recorded_in']} | {fmt_value(r['measured'])} {r['unit']} | "
                  f"{r['error_pct']:+.1f}% | {r['now_pct']:+.1f}% |")
    else:
        for r in rows:
            print(f"  {r['id']:<34} predicted {fmt_value(r['predicted'])} {r['unit']} ({r['recorded_in']}), measured "
                  f"{fmt_value(r['measured'])} {r['unit']}: {r['error_pct']:+6.1f}%, now {r['now_pct']:+6.1f}%")


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
    # Both need every point: the records are the whole set's, and the refits without each source
    # fit on the others. Refused before anything runs.
    for flag, given in (("--record", args.record), ("--check", args.check)):
        if given and args.only:
            sys.exit(f"validate: {flag} needs every point (no --only)")

    with open(args.data) as f:
        data = json.load(f)
    all_points = data["points"]
    constants = data.get("fitted_constants", {})
    check_fitted_constants(all_points, constants)
    points = all_points
    if args.only:
        wanted = set(args.only.split(","))
        points = [p for p in points if selected(p, wanted)]
        if not points:
            sys.exit(f"validate: --only {args.only}: no point is of these categories or has these ids")
    ids = [p["id"] for p in points]
    if len(set(ids)) != len(ids):
        sys.exit("validate: two points share an id")
    # A point whose source had a constant fitted on it alone runs a second time, as a prediction.
    variants = {p["id"]: v for p in points if (v := loso_point(p, all_points, constants))}
    runs = points + list(variants.values())

    figures, summaries = {}, {}
    if args.from_runs:
        for p in runs:
            figures[p["id"]], summaries[p["id"]] = load_run(args.from_runs, p)
    else:
        def timed_run(p):
            start = time.monotonic()
            figure, summary = run_point(args.tpusim, p)
            if args.save_runs:
                save_run(args.save_runs, p, figure, summary, time.monotonic() - start)
            return figure, summary

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {p["id"]: pool.submit(timed_run, p) for p in runs}
            for p in runs:
                figures[p["id"]], summaries[p["id"]] = futures[p["id"]].result()

    def error_pct(point, figure):
        return 100.0 * (figure - point["measured"]["value"]) / point["measured"]["value"]

    errors = {p["id"]: error_pct(p, figures[p["id"]]) for p in points}
    eval_prior = constants.get(EVAL_HOST, {}).get("prior")
    fit = eval_host_fit(points, figures, summaries, eval_prior)
    refitted = {r["id"]: r["other_sources_error_pct"] for r in (fit["points"] if fit else []) if r["other_sources_error_pct"] is not None}
    additive = [f for name, c in constants.items() if c["fit"] == ADDITIVE_FIT
                if (f := additive_fit(name, c, points, figures, summaries))]
    loso_errors = {}
    for p in points:
        run_id = variants[p["id"]]["id"] if p["id"] in variants else p["id"]
        shifts_s = [d for f in additive if (d := additive_refit_for(p, summaries.get(run_id), f)) is not None]
        if run_id != p["id"] or shifts_s:
            figure = figures[run_id]
            if p["measured"]["unit"] in TIME_UNITS:
                figure += sum(shifts_s) / TIME_UNITS[p["measured"]["unit"]]
            elif shifts_s:  # a rate over the time that pays the constant
                time_s = summaries[run_id]["time_s"]
                figure *= time_s / (time_s + sum(shifts_s))
            loso_errors[p["id"]] = error_pct(p, figure)
        else:
            loso_errors[p["id"]] = refitted.get(p["id"], errors[p["id"]])
    table = summarize(points, errors, loso_errors)

    rows = []
    for p in points:
        e, lo = errors[p["id"]], loso_errors[p["id"]]
        rows.append([p["id"], p["category"], p["generation"], f"{fmt_value(p['measured']['value'])} {p['measured']['unit']}",
                     f"{fmt_value(figures[p['id']])} {p['measured']['unit']}", f"{e:+.1f}%", "optimistic" if optimistic(p, e) else "pessimistic",
                     f"{lo:+.1f}%", ", ".join(p.get("fitted_for", []))])
    header = ["point", "category", "hardware", "measured", "tpusim", "error", "direction", "without its source", "fitted on it"]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        print()
        print("| category | points | mean abs error | max abs error | leave-one-source-out mean | leave-one-source-out max |")
        print("|---|---:|---:|---:|---:|---:|")
        for c, t in table.items():
            print(f"| {c} | {t['points']} | {t['mean_abs_error_pct']:.1f}% | {t['max_abs_error_pct']:.1f}% | "
                  f"{t['loso_mean_abs_error_pct']:.1f}% | {t['loso_max_abs_error_pct']:.1f}% |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for r in [header] + rows:
            print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip())
        print()
        for c, t in table.items():
            print(f"{c:<11} {t['points']:>3} points  mean |error| {t['mean_abs_error_pct']:5.1f}%  max {t['max_abs_error_pct']:5.1f}%"
                  f"  leave-one-source-out: mean {t['loso_mean_abs_error_pct']:5.1f}%  max {t['loso_max_abs_error_pct']:5.1f}%")

    print_first_predictions(first_predictions(points, errors), args.markdown)
    for f in additive:
        print_additive_fit(f, args.markdown)
    if fit:
        print_eval_host_fit(fit, args.markdown)

    # Each training point's kind (as its run's summary names it) and errors: what every run of the
    # same kind reports as its error band (summary.json "validation").
    point_records = {p["id"]: {"kind": summaries[p["id"]]["validation"]["kind"], "error_pct": round(errors[p["id"]], 2),
                               "loso_error_pct": round(loso_errors[p["id"]], 2)}
                     for p in points if summaries.get(p["id"]) and "validation" in summaries[p["id"]]}
    if args.record:
        data["recorded"] = {c: t["mean_abs_error_pct"] for c, t in table.items()}
        data["recorded_loso"] = {c: t["loso_mean_abs_error_pct"] for c, t in table.items()}
        data["recorded_points"] = point_records
        with open(args.data, "w") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
    if args.check:
        worse = []
        for key, field in (("recorded", "mean_abs_error_pct"), ("recorded_loso", "loso_mean_abs_error_pct")):
            recorded = data.get(key, {})
            worse += [f"{c} ({key}): {t[field]:.2f}% against {recorded[c]:.2f}% recorded"
                      for c, t in table.items() if c in recorded and t[field] > recorded[c] + TOLERANCE_POINTS]
        if worse:
            print("validate: the mean error grew by more than one point: " + "; ".join(worse), file=sys.stderr)
            sys.exit(1)
        # The bands runs report must be today's: a point's error or kind moved from its record
        # means recording again (--record), so no run quotes a figure the model no longer gives.
        kept = data.get("recorded_points", {})
        moved = [f"{i}: {r['kind']}, {r['error_pct']:+.1f}% ({r['loso_error_pct']:+.1f}% without its source) against "
                 f"{kept[i]['kind']}, {kept[i]['error_pct']:+.1f}% ({kept[i].get('loso_error_pct', float('nan')):+.1f}%) recorded"
                 for i, r in point_records.items()
                 if i in kept and (abs(r["error_pct"] - kept[i]["error_pct"]) > TOLERANCE_POINTS or r["kind"] != kept[i]["kind"]
                                   or abs(r["loso_error_pct"] - kept[i].get("loso_error_pct", float("inf"))) > TOLERANCE_POINTS)]
        missing = [i for i in point_records if i not in kept]
        if moved or missing:
            print("validate: the recorded error bands are out of date (run bench/validate.py --record): " +
                  "; ".join(moved + [f"{i}: not recorded" for i in missing]), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
