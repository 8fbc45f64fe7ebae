"""bench/validate.py's least-squares fit of the evaluation's host time and its leave-one-out
errors, on blocks whose lengths are known by construction (no simulator run)."""
import importlib.util
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("validate", os.path.join(ROOT, "bench", "validate.py"))
validate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(validate)


def block_point(point_id, base_s, measured_block_s, host_run_s, fitted=True):
    """A training point whose run, with `host_run_s` of host time, had blocks of `base_s` of
    device time, and whose measurement implies blocks of `measured_block_s`: (point, tpusim's
    figure, the run's summary). 1,000 samples per block on one chip."""
    samples = 1000.0
    every_steps, step_s = 100.0, (base_s - 0.5) / 100.0  # 0.5 s of forward passes
    point = {"id": point_id, "measured": {"value": samples / measured_block_s, "unit": "samples/s/chip"},
             "tpusim": ["run", "w.json", "--set", f"{validate.EVAL_HOST}={host_run_s}"],
             "fitted_for": [validate.EVAL_HOST] if fitted else []}
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

    def test_each_point_is_judged_by_the_fit_of_the_others(self):
        fit = fit_of(block_point("a", 9, 10, 1.3), block_point("b", 18, 20, 1.3), block_point("c", 37, 40, 1.3))
        a = fit["points"][0]
        others = (2 / 400 + 3 / 1600) / (1 / 400 + 1 / 1600)
        self.assertAlmostEqual(a["leave_one_out_s"], others, places=9)
        self.assertAlmostEqual(a["leave_one_out_error_pct"], 100 * (10 / (9 + others) - 1), places=9)
        # As run (1.3 s of host time) a's block is 10.3 s against 10 measured: its throughput is low.
        self.assertAlmostEqual(a["error_pct"], 100 * (10 / 10.3 - 1), places=9)

    def test_a_point_not_fitted_on_the_constant_stays_out(self):
        with_it = fit_of(block_point("a", 9, 10, 1.3), block_point("b", 18, 20, 1.3),
                         block_point("held", 5, 50, 1.3, fitted=False))
        without = fit_of(block_point("a", 9, 10, 1.3), block_point("b", 18, 20, 1.3))
        self.assertEqual([r["id"] for r in with_it["points"]], ["a", "b"])
        self.assertAlmostEqual(with_it["value_s"], without["value_s"], places=12)

    def test_one_point_has_no_others_to_fit_on(self):
        fit = fit_of(block_point("a", 9, 10, 1.3))
        self.assertAlmostEqual(fit["value_s"], 1.0, places=9)
        self.assertIsNone(fit["points"][0]["leave_one_out_error_pct"])

    def test_a_fitted_point_whose_run_has_no_evaluation_is_refused(self):
        point, figure, summary = block_point("a", 9, 10, 1.3)
        del summary["eval"]
        with self.assertRaisesRegex(ValueError, "a: fitted for"):
            validate.eval_host_fit([point], {"a": figure}, {"a": summary})


if __name__ == "__main__":
    unittest.main()
