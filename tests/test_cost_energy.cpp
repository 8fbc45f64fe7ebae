// Cost and energy (issue 17): the formulas on their own, the presets' prices and power figures,
// and the summary of real runs (every run writes into a fresh temporary directory).
#define BOOST_TEST_MODULE cost_energy
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "sim/cost_energy.hpp"
#include "sim/errors.hpp"
#include "run_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_CASE(a_partial_last_batch_costs_a_whole_step_and_the_first_step_its_own_time) {
  Workload w;
  w.dataset_examples = 60000;
  w.epochs = 3;
  const auto run = training_run(w, 1024, 0.5, 0.25);
  BOOST_REQUIRE(run);
  BOOST_TEST(run->steps_per_epoch == 59u);  // 58 full batches and one of 608 examples
  BOOST_TEST(run->steps == 177u);
  BOOST_TEST(run->time_s == 0.5 + 176 * 0.25);
  w.dataset_examples = 0;
  BOOST_TEST(!training_run(w, 1024, 0.5, 0.25));  // no dataset stated, no run
}

BOOST_AUTO_TEST_CASE(chip_power_runs_from_idle_to_max_with_the_mxu_and_hbm_busy_fractions) {
  ChipPower p;
  p.idle_w = 90;
  p.max_w = 192;
  p.mxu_share = 0.5;
  BOOST_TEST(chip_power_w(p, 0, 0) == 90.0);
  BOOST_TEST(chip_power_w(p, 1, 1) == 192.0);
  BOOST_TEST(chip_power_w(p, 1, 0) == 141.0);  // half the span follows the MXUs
  p.mxu_share = 0.8;
  BOOST_TEST(chip_activity(p, 0.5, 0.25) == 0.45, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(cost_usd(3600, 4, 3.22) == 12.88, boost::test_tools::tolerance(1e-12));  // a v4-8 hour
}

BOOST_AUTO_TEST_CASE(every_preset_has_a_price_and_a_consistent_power_range) {
  for (const auto& name : preset_names()) {
    BOOST_TEST_CONTEXT(name) {
      ConfigRequest request;
      request.hw = name;
      const Config config = load_config(request);
      // A generation whose price and power are not yet public says so in its sources (dated),
      // and the summary then reports no cost or energy rather than a guess.
      const nlohmann::json& sources = config.hw_doc["sources"];
      if (!config.hw.chip.price_usd_per_chip_hour && !config.hw.chip.power) {
        BOOST_TEST(contains(sources["chip.price_usd_per_chip_hour"].get<std::string>(), "not published"));
        BOOST_TEST(contains(sources["chip.power"].get<std::string>(), "not published"));
        BOOST_TEST(contains(sources["chip.price_usd_per_chip_hour"].get<std::string>(), "read 20"));
        continue;
      }
      BOOST_REQUIRE(config.hw.chip.price_usd_per_chip_hour.has_value());
      BOOST_TEST(*config.hw.chip.price_usd_per_chip_hour > 0);
      BOOST_REQUIRE(config.hw.chip.power.has_value());
      const ChipPower& p = *config.hw.chip.power;
      BOOST_TEST(p.idle_w > 0);
      BOOST_REQUIRE(p.typical_w.has_value());
      BOOST_TEST(p.idle_w <= *p.typical_w);
      BOOST_TEST(*p.typical_w <= p.max_w);
      // The price's source says when it was read, as the issue asks.
      BOOST_TEST(contains(config.hw_doc["sources"]["chip.price_usd_per_chip_hour"].get<std::string>(), "read 20"));
    }
  }
}

BOOST_AUTO_TEST_CASE(inconsistent_power_figures_are_refused_naming_the_key) {
  ConfigRequest request;
  request.hw = "tpu_v4";
  request.sets = {"hw.chip.power.max_w=50"};
  BOOST_TEST(contains(load_error(request), "hw.chip.power.max_w: 50 W is below hw.chip.power.idle_w (90 W)"));
  request.sets = {"hw.chip.price_usd_per_chip_hour=-1"};
  BOOST_TEST(contains(load_error(request), "hw.chip.price_usd_per_chip_hour: expected number between"));
  TempDir dir;  // a hardware file that gives one end of the power range only
  request.sets = {};
  request.hw = dir.write("half.json", R"({"base": "tpu_v4", "name": "half", "chip": {"power": {"idle_w": null}}})");
  BOOST_TEST(contains(load_error(request), "hw.chip.power.idle_w: missing: the power model needs both"));
}

BOOST_AUTO_TEST_CASE(cost_per_step_is_step_time_times_chips_times_price_per_hour) {
  const auto run = run_example("--trace none");
  const json& s = run->summary;
  const json& c = s["cost"];
  const double price = c["price_usd_per_chip_hour"].get<double>();
  BOOST_TEST(price == 1.125);  // tpu_v2: a v2-8 at 4.50 USD an hour over its 4 chips
  const double expected = s["step_time_s"].get<double>() * s["chips"].get<double>() * price / 3600.0;
  BOOST_TEST(c["usd_per_step"].get<double>() == expected);  // exactly: the same operations in the same order
  BOOST_TEST(c["usd_per_million_samples"].get<double>() == expected / 1024 * 1e6);
  BOOST_TEST(c["samples_per_usd"].get<double>() == 1024 / expected);
  BOOST_TEST(c["training_steps"].is_null());  // the example states no dataset
  BOOST_TEST(run->result.out.find("  cost           $") != std::string::npos, run->result.out);
  BOOST_TEST(run->result.out.find("  energy         ") != std::string::npos, run->result.out);
  BOOST_TEST(run->result.out.find("to train") == std::string::npos);
  // The CSV carries the same figures, as every other one.
  const std::string csv = read_file(run->out() + "/summary.csv");
  BOOST_TEST(csv.find("cost.usd_per_step") != std::string::npos);
  BOOST_TEST(csv.find("energy.joules_per_step") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(overriding_the_price_scales_every_cost_and_nothing_else) {
  const auto base = run_example("--trace none");
  const auto doubled = run_example("--trace none --set hw.chip.price_usd_per_chip_hour=2.25");
  const json& a = base->summary;
  const json& b = doubled->summary;
  BOOST_TEST(b["step_time_s"] == a["step_time_s"]);
  BOOST_TEST(b["energy"] == a["energy"]);
  BOOST_TEST(b["cost"]["usd_per_step"].get<double>() == 2 * a["cost"]["usd_per_step"].get<double>());
  BOOST_TEST(b["cost"]["usd_per_million_samples"].get<double>() ==
             2 * a["cost"]["usd_per_million_samples"].get<double>());
}

BOOST_AUTO_TEST_CASE(energy_per_step_lies_between_idle_and_max_power_over_the_step) {
  for (const char* hw : {"tpu_v3", "tpu_v4"}) {  // the two generations with measured figures
    BOOST_TEST_CONTEXT(hw) {
      const auto run = run_example(std::string("--trace none --hw ") + hw);
      const json& s = run->summary;
      const json& e = s["energy"];
      const double chip_seconds = s["step_time_s"].get<double>() * s["chips"].get<double>();
      const double joules = e["joules_per_step"].get<double>();
      BOOST_TEST(joules >= e["idle_w"].get<double>() * chip_seconds);
      BOOST_TEST(joules <= e["max_w"].get<double>() * chip_seconds);
      // Busy units draw more than idle ones: a simulated step with MXU work is above idle.
      BOOST_TEST(s["utilization"]["mxu"].get<double>() > 0);
      BOOST_TEST(joules > e["idle_w"].get<double>() * chip_seconds);
      BOOST_TEST(e["joules_per_sample"].get<double>() == joules / s["global_batch"].get<double>());
      const double activity = 0.5 * s["utilization"]["mxu"].get<double>() + 0.5 * s["utilization"]["hbm"].get<double>();
      BOOST_TEST(e["activity"].get<double>() == activity, boost::test_tools::tolerance(1e-12));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_stated_dataset_gives_the_time_cost_and_energy_to_train) {
  const auto run = run_example("--trace none --set workload.training.dataset_examples=60000 --set workload.training.epochs=2");
  const json& s = run->summary;
  const json& c = s["cost"];
  BOOST_TEST(c["training_steps"].get<std::uint64_t>() == 118u);  // ceil(60000 / 1024) = 59 per epoch
  const double time = s["first_step_time_s"].get<double>() + 117 * s["step_time_s"].get<double>();
  BOOST_TEST(c["time_to_train_s"].get<double>() == time);
  BOOST_TEST(c["usd_to_train"].get<double>() == time * 4 * 1.125 / 3600.0);
  const double kwh = s["energy"]["chip_power_w"].get<double>() * 4 * time / 3.6e6;
  BOOST_TEST(s["energy"]["kwh_to_train"].get<double>() == kwh, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(run->result.out.find("  to train       118 steps: ") != std::string::npos, run->result.out);
}

BOOST_AUTO_TEST_CASE(hardware_without_a_price_or_power_says_so_instead_of_reporting_zero) {
  TempDir dir;
  // A merge patch's null removes the inherited key: the hardware of an unpriced chip.
  const std::string hw = dir.write(
      "unpriced.json",
      R"({"base": "tpu_v2", "name": "unpriced", "chip": {"price_usd_per_chip_hour": null, "power": {"idle_w": null, "typical_w": null, "max_w": null}}})");
  const auto run = run_example("--trace none --hw '" + hw + "'");
  const json& s = run->summary;
  BOOST_TEST(s["status"] == "ok");
  BOOST_TEST(s["cost"]["price_usd_per_chip_hour"].is_null());
  BOOST_TEST(s["cost"]["usd_per_step"].is_null());
  BOOST_TEST(s["energy"]["joules_per_step"].is_null());
  BOOST_TEST(run->result.out.find("  cost           no price for this hardware: set hw.chip.price_usd_per_chip_hour") !=
                 std::string::npos,
             run->result.out);
  BOOST_TEST(run->result.out.find("  energy         no power figures for this hardware") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_negative_price_is_an_input_error_naming_the_key) {
  TempDir dir;
  const std::string out = dir.path("out");
  const CommandResult r =
      run_tpusim("run '" + example_workload() + "' -o '" + out + "' --set hw.chip.price_usd_per_chip_hour=-3");
  BOOST_TEST_CONTEXT("stderr: " << r.err) {
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(r.err.find("hw.chip.price_usd_per_chip_hour: expected number between 0.0001 and 1000000 (USD/chip-hour), got -3") !=
               std::string::npos);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    BOOST_TEST(!fs::exists(out));
  }
  const std::string workload = dir.write("w.json", [] {
    std::string text = read_file(example_workload());
    const auto at = text.find("\"global_batch\": 1024");
    BOOST_REQUIRE(at != std::string::npos);
    return text.replace(at, 20, "\"global_batch\": 1024, \"dataset_examples\": -5");
  }());
  const CommandResult bad = run_tpusim("run '" + workload + "' -o '" + out + "'");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("workload.training.dataset_examples: expected integer between 0 and") != std::string::npos, bad.err);
}

BOOST_AUTO_TEST_CASE(every_preset_prints_a_cost_and_an_energy_line) {
  for (const auto& name : preset_names()) {
    BOOST_TEST_CONTEXT(name) {
      const auto run = run_example("--trace none --hw " + name);
      if (name == "tpu_v7") {  // neither is published yet: the lines say so
        BOOST_TEST(run->result.out.find("  cost           no price for this hardware") != std::string::npos, run->result.out);
        BOOST_TEST(run->result.out.find("  energy         no power figures for this hardware") != std::string::npos);
        continue;
      }
      BOOST_TEST(run->result.out.find("  cost           $") != std::string::npos, run->result.out);
      BOOST_TEST(run->result.out.find(" W per chip (activity ") != std::string::npos, run->result.out);
      BOOST_TEST(run->summary["cost"]["usd_per_step"].get<double>() > 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_trace_carries_each_chips_power_step_by_step) {
  // A counter per chip, one sample per step and one at the run's end; the last step's is the
  // summary's chip power (the four chips of the example are alike), every one within the range.
  const auto run = run_example("");
  const json trace = json::parse(read_file(run->out() + "/trace.json"));
  const json& energy = run->summary["energy"];
  std::map<int, std::vector<double>> watts_by_chip;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "chip power") watts_by_chip[e["pid"].get<int>()].push_back(e["args"]["W"].get<double>());
  BOOST_TEST(watts_by_chip.size() == run->summary["chips"].get<std::size_t>());
  for (const auto& [pid, watts] : watts_by_chip) {
    BOOST_TEST_CONTEXT("pid " << pid) {
      BOOST_TEST(watts.size() == run->summary["steps"].get<std::size_t>() + 1);
      BOOST_TEST(watts.back() == energy["chip_power_w"].get<double>(), boost::test_tools::tolerance(1e-5));
      for (double w : watts) {
        BOOST_TEST(w >= energy["idle_w"].get<double>());
        BOOST_TEST(w <= energy["max_w"].get<double>());
      }
    }
  }
}

// Issue 39: goodput over a whole run. Daly's interval against its closed form, and against the
// wall time it is meant to minimize.
BOOST_AUTO_TEST_CASE(the_checkpoint_interval_is_young_and_dalys_optimum) {
  const double write_s = 60, mtbf_s = 6 * 3600.0;
  const double young_s = std::sqrt(2 * write_s * mtbf_s);  // 1,609.97 s
  const double x = std::sqrt(write_s / (2 * mtbf_s));
  const double daly_s = young_s * (1 + x / 3 + x * x / 9) - write_s;
  BOOST_TEST(optimal_checkpoint_interval_s(write_s, mtbf_s) == daly_s, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(std::fabs(daly_s - young_s) < 0.05 * young_s);  // Young's to first order
  // The expected wall time is smallest there: a search over the interval finds it within 0.5%.
  const double solve_s = 30 * 24 * 3600.0, restart_s = 600;
  double best_s = 0, best_wall_s = INFINITY;
  for (double tau = 100; tau < 20000; tau *= 1.001) {
    const double wall_s = expected_wall_time_s(solve_s, tau, write_s, restart_s, mtbf_s);
    if (wall_s < best_wall_s) best_wall_s = wall_s, best_s = tau;
  }
  BOOST_TEST(std::fabs(best_s - daly_s) < 0.005 * daly_s, best_s << " against " << daly_s);
  BOOST_TEST(expected_wall_time_s(solve_s, daly_s, write_s, restart_s, mtbf_s) <= best_wall_s * (1 + 1e-6));
  // Without failures the wall time is the work plus one write per interval.
  BOOST_TEST(expected_wall_time_s(solve_s, 3600, write_s, restart_s, 1e15) == solve_s * (3600 + write_s) / 3600,
             boost::test_tools::tolerance(1e-6));
  // A write longer than twice the mean time between failures: Daly's interval is that mean.
  BOOST_TEST(optimal_checkpoint_interval_s(3 * 3600, 3600) == 3600);
}

BOOST_AUTO_TEST_CASE(a_failure_rate_gives_the_goodput_and_the_time_cost_and_energy_to_train_with_failures) {
  const std::string goodput = " --set workload.training.goodput.failures_per_chip_hour=0.01"
                              " --set workload.training.goodput.checkpoint_storage_gbps_per_host=0.001"
                              " --set workload.training.goodput.restart_s=120";
  const auto run = run_example("--trace none --set workload.training.dataset_examples=6000000 --set workload.training.epochs=2" + goodput);
  const json& s = run->summary;
  const json& g = s["goodput"];
  BOOST_REQUIRE(g.is_object());
  const double chips = 4, hosts = 1;  // tpu_v2 2x2, 4 chips per host
  BOOST_TEST(g["mtbf_s"].get<double>() == 3600 / (chips * 0.01), boost::test_tools::tolerance(1e-12));
  // Adam: the f32 weights and two f32 slots for each (all trainable).
  const double params = s["parameters"].get<double>();
  BOOST_TEST(g["checkpoint_bytes"].get<double>() == 4 * (params + 2 * params));
  const double write_s = g["checkpoint_bytes"].get<double>() / (hosts * 0.001e9);
  BOOST_TEST(g["checkpoint_write_s"].get<double>() == write_s, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(g["restart_and_read_s"].get<double>() == 120 + write_s, boost::test_tools::tolerance(1e-12));
  const double mtbf_s = g["mtbf_s"].get<double>();
  const double interval_s = optimal_checkpoint_interval_s(write_s, mtbf_s);
  BOOST_TEST(g["checkpoint_interval_s"].get<double>() == interval_s, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(g["checkpoint_interval"] == "optimal");
  const double solve_s = s["cost"]["time_to_train_s"].get<double>();
  const double wall_s = expected_wall_time_s(solve_s, interval_s, write_s, 120 + write_s, mtbf_s);
  BOOST_TEST(g["time_to_train_s"].get<double>() == wall_s, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(g["goodput"].get<double>() == solve_s / wall_s, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(g["goodput"].get<double>() < 1.0);
  BOOST_TEST(g["samples_per_s"].get<double>() == s["samples_per_s"].get<double>() * g["goodput"].get<double>(),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(g["usd_to_train"].get<double>() == wall_s * chips * 1.125 / 3600, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(g["kwh_to_train"].get<double>() == s["energy"]["chip_power_w"].get<double>() * chips * wall_s / 3.6e6,
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(contains(run->result.out, "  goodput        "), run->result.out);
  BOOST_TEST(contains(run->result.out, "  with failures  "), run->result.out);
  BOOST_TEST(contains(read_file(run->out() + "/report.html"), "time to train with failures"));
  // A stated interval is used as stated.
  const auto stated = run_example("--trace none --set workload.training.goodput.checkpoint_interval_s=30" + goodput);
  BOOST_TEST(stated->summary["goodput"]["checkpoint_interval_s"].get<double>() == 30);
  BOOST_TEST(stated->summary["goodput"]["checkpoint_interval"] == "stated");
  BOOST_TEST(stated->summary["goodput"]["time_to_train_s"].is_null());  // no dataset stated
  // No failure rate: no goodput.
  BOOST_TEST(run_example("--trace none")->summary["goodput"].is_null());
}

BOOST_AUTO_TEST_CASE(a_failure_rate_without_the_checkpoints_storage_is_refused_naming_the_key) {
  TempDir dir;
  const std::string out = dir.path("out");
  const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + out +
                                     "' --set workload.training.goodput.failures_per_chip_hour=1e-5");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("workload.training.goodput.checkpoint_storage_gbps_per_host: expected the hosts' bandwidth") != std::string::npos,
             r.err);
  BOOST_TEST(!fs::exists(out));
}
