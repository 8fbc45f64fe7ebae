// A kind of hardware unit of one's own (traces/event_sink.hpp's register_unit_kind): a program
// registers it with a memory model that builds one per chip (tests/custom_unit_main.cpp, built
// as tpusim_custom_unit), and the summary, the trace and --trace-units take it in.
#define BOOST_TEST_MODULE custom_unit
#include <boost/test/unit_test.hpp>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "memory_bound_run.hpp"
#include "traces/event_sink.hpp"

using namespace tpusim::test;
using json = nlohmann::json;

namespace {

json summary_of(const TempDir& dir, const std::string& name, const std::string& extra) {
  return memory_bound_summary(CUSTOM_UNIT_BINARY, dir, name, extra);
}

}  // namespace

// Every transfer streams through the chips' compression engines: their bytes are what the cores
// asked of memory, the memory moves half of them, and the engine's rate sets the memory-bound
// pace (1000 GB/s: faster than v5e's memory at the calibrated 90% of 819 GB/s; 200 GB/s: slower).
BOOST_AUTO_TEST_CASE(a_users_unit_reports_its_own_utilization_and_traffic) {
  TempDir dir;
  const json plain = summary_of(dir, "plain", "--trace none");
  const json fast = summary_of(dir, "fast", "--trace none --set hw.hbm.model=compressed");
  const json slow = summary_of(dir, "slow", "--trace none --set hw.hbm.model=compressed --set hw.hbm.compressed.engine_bw_gbps=200");
  const auto raw = plain["traffic_per_step"]["hbm_bytes"].get<double>();
  BOOST_TEST(plain["utilization"]["compressor"] == 0);  // the kind is known, no chip has one
  BOOST_TEST(plain["traffic_per_step"]["compressor_bytes"] == 0);
  BOOST_TEST(fast["traffic_per_step"]["compressor_bytes"].get<double>() == raw);
  BOOST_TEST(fast["traffic_per_step"]["hbm_bytes"].get<double>() == 0.5 * raw, boost::test_tools::tolerance(0.001));
  BOOST_TEST(fast["checks"]["hbm_bytes"] == plain["checks"]["hbm_bytes"]);  // what the requesters asked for
  BOOST_TEST(fast["utilization"]["compressor"].get<double>() > 0.3);
  BOOST_TEST(fast["step_time_s"].get<double>() < plain["step_time_s"].get<double>());
  BOOST_TEST(slow["step_time_s"].get<double>() > plain["step_time_s"].get<double>());
  BOOST_TEST(slow["utilization"]["compressor"].get<double>() > fast["utilization"]["compressor"].get<double>());
}

// Its track is in the trace, named by its kind, and --trace-units takes the kind, which the
// program without it does not know.
BOOST_AUTO_TEST_CASE(a_users_unit_has_its_trace_track) {
  TempDir dir;
  summary_of(dir, "traced", "--set hw.hbm.model=compressed --trace ops --trace-units compressor");
  const json trace = json::parse(read_file(dir.path("traced/trace.json")));
  std::size_t compressor_slices = 0;
  for (const json& e : trace["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("cat", "") == "compressor") ++compressor_slices;
  BOOST_TEST(compressor_slices > 0u);
  // A bar of its own among the report's utilization bars (the timeline shows its track either way).
  const std::string report = read_file(dir.path("traced/report.html"));
  const auto from = report.find("id=\"utilization\""), to = report.find("id=\"memory\"");
  BOOST_TEST_REQUIRE((from != std::string::npos && to != std::string::npos && from < to));
  BOOST_TEST(contains(report.substr(from, to - from), ">compressor<"));
  const CommandResult stock = run_tpusim(memory_bound_run() + " --trace-units compressor -o '" + dir.path("stock") + "'");
  BOOST_TEST(stock.exit_code == 2);
  BOOST_TEST(contains(stock.err, "--trace-units compressor: unknown kind \"compressor\""), stock.err);
}

BOOST_AUTO_TEST_CASE(a_kind_may_not_take_another_kinds_name_or_keys) {
  using tpusim::UnitKindTraits;
  const auto refused = [](const UnitKindTraits& traits, const std::string& message) {
    BOOST_CHECK_EXCEPTION(tpusim::register_unit_kind(traits), std::invalid_argument,
                          [&](const std::invalid_argument& e) { return contains(e.what(), message); });
  };
  refused({tpusim::UnitKind{}, "hbm", tpusim::TraceLevel::Ops, true, false, true, 4, nullptr, nullptr, nullptr},
          "a unit kind named \"hbm\" exists already");
  refused({tpusim::UnitKind{}, "accelerator", tpusim::TraceLevel::Ops, true, false, true, 4, "mxu", nullptr, nullptr},
          "the summary key \"mxu\" is kind \"mxu\"'s");
  const std::size_t before = tpusim::unit_kinds().size();
  const tpusim::UnitKind kind = tpusim::register_unit_kind(
      {tpusim::UnitKind{}, "accelerator", tpusim::TraceLevel::Ops, true, false, true, 4, "accelerator", nullptr, ""});
  BOOST_TEST(static_cast<std::size_t>(kind) == before);
  BOOST_TEST(tpusim::unit_kind_name(kind) == std::string("accelerator"));
}
