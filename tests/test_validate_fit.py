"""bench/validate.py's least-squares fit of the evaluation's host time, its leave-one-source-out
errors and the reruns that judge a point without its source's one-point fits, on blocks and
points known by construction (no simulator run)."""
import importlib.util
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("validate", os.path.join(ROOT, "bench", "validate.py"))
validate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(validate)


def block_point(point_id, base_s, measured_block_s, host_run_s, fitted=True, source=None):
    """A training point whose run, with `host_run_s` of host time, had blocks of `base_s` of
    device time, and whose measurement implies blocks of `measured_block_s`: (point, tpusim's
    figure, the run's summary). 1,000 samples per block on one chip; a source of its own unless
    `source` is given."""
    samples = 1000.0
    every_steps, step_s = 100.0, (base_s - 0.5) / 100.0  # 0.5 s of forward passes
    point = {"id": point_id, "measured": {"value": samples / measured_block_s, "unit": "samples/s/chip"},
             "tpusim": ["run", "w.json", "--set", f"{validate.EVAL_HOST}={host_run_s}"],
             "fitted_for": [validate.EVAL_HOST] if fitted else [],
             "source": source or f"owner/{point_id}@0123abc:log.txt"}
    summary = {"step_time_s": step_s, "eval": {"every_steps": every_steps, "device_time_s": 0.5}}
    return point, samples / (base_s + host_run_s), summary


def fit_of(*made):
    points = [m[0] for m in made]
    figures = {m[0]["id"]: m[1] for m in made}
    summaries = {m[0]["id"]: m[2] for m in made}
    return validate.eval_host_fit(points, figures, summaries)


class EvalHostFit(unittest.TestCase):
    def test_the_short_blocks_weigh_most(self):
        # Blocks of 10, 20 and 40 s implying 1, 2 and 3 s of host time, weighed by 1/K^2.
        fit = fit_of(block_point("a", 9, 10, 1.3), block_point("b", 18, 20, 1.3), block_point("c", 37, 40, 1.3))
        expected = (1 / 100 + 2 / 400 + 3 / 1600) / (1 / 100 + 1 / 400 + 1 / 1600)
        self.assertAlmostEqual(fit["value_s"], expected, places=9)
        self.assertEqual([round(r["implied_s"], 9) for r in fit["points"]], [1, 2, 3])

    def test_each_point_is_judged_by_the_fit_of_the_other_sources(self):
        fit = fit_of(block_point("a", 9, 10, 1.3), block_point("b", 18, 20, 1.3), block_point("c", 37, 40, 1.3))
        a = fit["points"][0]
        others = (2 / 400 + 3 / 1600) / (1 / 400 + 1 / 1600)
        self.assertAlmostEqual(a["other_sources_s"], others, places=9)
        self.assertAlmostEqual(a["other_sources_error_pct"], 100 * (10 / (9 + others) - 1), places=9)
        # As run (1.3 s of host time) a's block is 10.3 s against 10 measured: its throughput is low.
        self.assertAlmostEqual(a["error_pct"], 100 * (10 / 10.3 - 1), places=9)

    def test_a_point_not_fitted_on_the_constant_stays_out(self):
        with_it = fit_of(block_point("a", 9, 10, 1.3), block_point("b", 18, 20, 1.3),
                         block_point("held", 5, 50, 1.3, fitted=False))
        without = fit_of(block_point("a", 9, 10, 1.3), block_point("b", 18, 20, 1.3))
        self.assertEqual([r["id"] for r in with_it["points"]], ["a", "b"])
        self.assertAlmostEqual(with_it["value_s"], without["value_s"], places=12)

    def test_the_points_of_one_source_leave_together(self):
        # a and b share a source: each is judged by c's fit alone, not by the other's.
        fit = fit_of(block_point("a", 9, 10, 1.3, source="mlcommons/round@1:a"),
                     block_point("b", 18, 20, 1.3, source="mlcommons/round@1:b"), block_point("c", 37, 40, 1.3))
        for row in fit["points"][:2]:
            self.assertAlmostEqual(row["other_sources_s"], 3.0, places=9)
        self.assertAlmostEqual(fit["points"][1]["other_sources_error_pct"], 100 * (20 / (18 + 3.0) - 1), places=9)

    def test_one_source_has_no_others_to_fit_on(self):
        fit = fit_of(block_point("a", 9, 10, 1.3))
        self.assertAlmostEqual(fit["value_s"], 1.0, places=9)
        self.assertIsNone(fit["points"][0]["other_sources_error_pct"])
        # With a prior, the point is judged at it.
        point, figure, summary = block_point("a", 9, 10, 1.3)
        at_prior = validate.eval_host_fit([point], {"a": figure}, {"a": summary}, prior_s=0.0)
        self.assertAlmostEqual(at_prior["points"][0]["other_sources_error_pct"], 100 * (10 / 9 - 1), places=9)

    def test_a_fitted_point_whose_run_has_no_evaluation_is_refused(self):
        point, figure, summary = block_point("a", 9, 10, 1.3)
        del summary["eval"]
        with self.assertRaisesRegex(ValueError, "a: fitted for"):
            validate.eval_host_fit([point], {"a": figure}, {"a": summary})


def op_point(point_id, source, generation="tpu_v5e", fitted_for=()):
    return {"id": point_id, "generation": generation, "source": source, "fitted_for": list(fitted_for),
            "tpusim": ["gemm", "1024", "1024", "1024", "--hw", generation]}


CONSTANTS = {
    "hw.host.launch_overhead_us": {"set": "hw.host.launch_overhead_us", "fit": "one_point", "prior": 0},
    "hw.hbm.latency_ns (tpu_v5e)": {"set": "hw.hbm.latency_ns", "generation": "tpu_v5e", "fit": "one_point", "prior": 250},
    validate.EVAL_HOST: {"set": validate.EVAL_HOST, "fit": validate.EVAL_HOST_FIT, "prior": 0},
}


class LeaveOneSourceOut(unittest.TestCase):
    def setUp(self):
        self.points = [
            op_point("fit", "jax-ml/jax@d0d0815:docs/guide.ipynb (the guide)", fitted_for=["hw.host.launch_overhead_us"]),
            op_point("same-source-v5e", "jax-ml/jax@d0d0815:docs/guide.ipynb (the guide)", fitted_for=["hw.hbm.latency_ns (tpu_v5e)"]),
            op_point("same-source-v3", "jax-ml/jax@d0d0815:docs/other.ipynb", generation="tpu_v3"),
            op_point("other-source", "ayaka14732/tutorial@295bb66:chapter03.txt"),
        ]

    def test_a_source_is_its_repository(self):
        self.assertEqual(validate.source_of(self.points[0]), "jax-ml/jax")
        self.assertEqual(validate.source_of({"source": "marin-community/marin#6736 (comment)"}), "marin-community/marin")
        self.assertEqual(validate.source_of({"source": "jax-ml/scaling-book pull request #82"}), "jax-ml/scaling-book")
        self.assertEqual(validate.source_of({"source": "https://cloud.google.com/tpu/docs/v5e (the page)"}), "cloud.google.com/tpu")

    def test_a_sources_points_run_with_its_one_point_fits_at_their_priors(self):
        v5e = validate.loso_point(self.points[1], self.points, CONSTANTS)
        self.assertEqual(v5e["id"], "same-source-v5e" + validate.LOSO_SUFFIX)
        self.assertEqual(v5e["tpusim"][-4:], ["--set", "hw.host.launch_overhead_us=0", "--set", "hw.hbm.latency_ns=250"])
        # A constant scoped to a generation leaves the source's other generations alone.
        v3 = validate.loso_point(self.points[2], self.points, CONSTANTS)
        self.assertEqual(v3["tpusim"][-2:], ["--set", "hw.host.launch_overhead_us=0"])

    def test_a_point_of_a_source_with_no_fit_runs_once(self):
        self.assertIsNone(validate.loso_point(self.points[3], self.points, CONSTANTS))

    def test_a_constant_the_data_file_does_not_describe_is_refused(self):
        with self.assertRaises(SystemExit):
            validate.check_fitted_constants([op_point("p", "a/b@1:c", fitted_for=["hw.unknown"])], CONSTANTS)

    def test_a_one_point_fit_named_by_two_points_is_refused(self):
        twice = [op_point("p", "a/b@1:c", fitted_for=["hw.host.launch_overhead_us"]),
                 op_point("q", "d/e@1:f", fitted_for=["hw.host.launch_overhead_us"])]
        with self.assertRaises(SystemExit):
            validate.check_fitted_constants(twice, CONSTANTS)


def launch_point(point_id, source, measured_us, device_us, run_with_us=100.0):
    """A framework-timed op fitted on the launch: (point, tpusim's figure in us, its run's summary)."""
    point = {"id": point_id, "source": source, "metric": "framework_time_s", "fitted_for": ["hw.host.launch_overhead_us"],
             "measured": {"value": measured_us, "unit": "us"}}
    return point, device_us + run_with_us, {"time_s": device_us * 1e-6, "launch_overhead_s": run_with_us * 1e-6}


LAUNCH = {"set": "hw.host.launch_overhead_us", "fit": validate.ADDITIVE_FIT, "paid_as": "launch_overhead_s",
          "metric": "framework_time_s", "unit_s": 1e-6, "rounded_to": 10, "prior": 0}


class AdditiveFit(unittest.TestCase):
    def test_each_point_implies_its_measurement_less_the_device_time_and_the_short_ones_weigh_most(self):
        made = [launch_point("a", "x/a@1:f", 100, 10), launch_point("b", "y/b@1:f", 200, 20)]
        fit = validate.additive_fit("hw.host.launch_overhead_us", LAUNCH, [m[0] for m in made],
                                    {m[0]["id"]: m[1] for m in made}, {m[0]["id"]: m[2] for m in made})
        self.assertAlmostEqual(fit["points"][0]["implied_s"], 90e-6, places=12)
        expected = (90e-6 / 100 ** 2 + 180e-6 / 200 ** 2) / (1 / 100 ** 2 + 1 / 200 ** 2)
        self.assertAlmostEqual(fit["value_s"], expected, places=12)
        # Without its source, a is judged by b's launch alone: its figure moves by 180 - 100 us.
        self.assertAlmostEqual(fit["points"][0]["other_sources_s"], 180e-6, places=12)
        shift = validate.additive_refit_for({**made[0][0], "metric": "framework_time_s"}, made[0][2], fit)
        self.assertAlmostEqual(shift, 80e-6, places=12)

    def test_one_source_alone_is_judged_at_the_prior(self):
        made = [launch_point("a", "x/a@1:f", 100, 10), launch_point("b", "x/a@1:g", 200, 20)]
        fit = validate.additive_fit("hw.host.launch_overhead_us", LAUNCH, [m[0] for m in made],
                                    {m[0]["id"]: m[1] for m in made}, {m[0]["id"]: m[2] for m in made})
        self.assertEqual([r["other_sources_s"] for r in fit["points"]], [0.0, 0.0])

    def test_a_rate_over_the_time_that_pays_it_moves_with_that_time(self):
        start = {"set": "hw.ici.collective_start_ns", "fit": validate.ADDITIVE_FIT, "paid_as": "collective_start_s",
                 "metric": "time_s", "unit_s": 1e-9, "rounded_to": 1000, "prior": 0}
        fitted = {"id": "a", "source": "x/a@1:f", "metric": "time_s", "fitted_for": ["hw.ici.collective_start_ns"],
                  "measured": {"value": 10, "unit": "us"}}
        other = {"id": "b", "source": "y/b@1:f", "metric": "time_s", "fitted_for": ["hw.ici.collective_start_ns"],
                 "measured": {"value": 6, "unit": "us"}}
        runs = {"a": {"time_s": 9e-6, "collective_start_s": 4e-6}, "b": {"time_s": 5e-6, "collective_start_s": 4e-6}}
        fit = validate.additive_fit("hw.ici.collective_start_ns", start, [fitted, other], {"a": 9.0, "b": 5.0}, runs)
        # A bandwidth point of a's source: its time pays the start, refitted on b's (5 us implied).
        rate = {"id": "c", "source": "x/a@1:g", "metric": "algbw_gbps", "measured": {"value": 80, "unit": "GB/s"}}
        self.assertAlmostEqual(validate.additive_refit_for(rate, {"time_s": 100e-6, "collective_start_s": 4e-6}, fit), 1e-6,
                               places=12)

    def test_a_device_timed_point_of_the_same_source_does_not_move(self):
        made = [launch_point("a", "x/a@1:f", 100, 10), launch_point("b", "y/b@1:f", 200, 20)]
        fit = validate.additive_fit("hw.host.launch_overhead_us", LAUNCH, [m[0] for m in made],
                                    {m[0]["id"]: m[1] for m in made}, {m[0]["id"]: m[2] for m in made})
        device_timed = {"id": "c", "source": "x/a@1:g", "metric": "time_s", "measured": {"value": 1, "unit": "ms"}}
        self.assertIsNone(validate.additive_refit_for(device_timed, {"time_s": 1e-3, "launch_overhead_s": 1e-4}, fit))


class FirstPredictions(unittest.TestCase):
    def test_a_prediction_is_judged_against_the_measurement_beside_the_error_now(self):
        points = [{"id": "p", "measured": {"value": 10.0, "unit": "s"},
                   "first_prediction": {"value": 8.0, "unit": "s", "recorded_in": "abc1234"}},
                  {"id": "q", "measured": {"value": 5.0, "unit": "s"}}]
        rows = validate.first_predictions(points, {"p": -5.0, "q": 1.0})
        self.assertEqual([r["id"] for r in rows], ["p"])
        self.assertAlmostEqual(rows[0]["error_pct"], -20.0, places=9)
        self.assertEqual(rows[0]["now_pct"], -5.0)

    def test_a_prediction_in_another_unit_is_refused(self):
        points = [{"id": "p", "measured": {"value": 10.0, "unit": "s"},
                   "first_prediction": {"value": 8000.0, "unit": "ms", "recorded_in": "abc1234"}}]
        with self.assertRaises(SystemExit):
            validate.first_predictions(points, {"p": 0.0})


if __name__ == "__main__":
    unittest.main()
