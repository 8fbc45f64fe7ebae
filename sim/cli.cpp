// The tpusim command line.
#include "sim/cli.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <system_error>
#include <limits>
#include <regex>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "sim/config.hpp"
#include "sim/collective_cmd.hpp"
#include "sim/hlo_cmd.hpp"
#include "sim/errors.hpp"
#include "sim/gemm.hpp"
#include "sim/import_cmd.hpp"
#include "sim/op_cmd.hpp"
#include "sim/membench.hpp"
#include "sim/names.hpp"
#include "sim/interrupt.hpp"
#include "sim/json_input.hpp"
#include "sim/params.hpp"
#include "sim/resources.hpp"
#include "sim/run.hpp"
#include "sim/stale_stack.hpp"
#include "sim/sweep.hpp"
#include "traces/trace_check.hpp"
#include "traces/trace_file.hpp"

namespace tpusim {
namespace {

// The kinds of track --trace-units may name, from the unit kinds' table.
std::vector<std::string> selectable_unit_kinds() {
  std::vector<std::string> names;
  for (const UnitKindTraits& kind : unit_kinds())
    if (kind.selectable) names.push_back(kind.name);
  return names;
}

// Digits only: an unsigned option would otherwise take -8 as 2^64 - 8.
CLI::Validator whole_number_of(const std::string& what) {
  return CLI::Validator(
      [what](std::string& text) {
        return text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos
                   ? fmt::format("expected a whole number{}, got {}", what.empty() ? "" : " of " + what, text)
                   : std::string();
      },
      "N");
}

// A byte count, with a unit or without ("1GiB", "64KiB", "4096"): rewritten to its digits.
CLI::Validator byte_size() {
  return CLI::Validator(
      [](std::string& text) {
        const auto bytes = parse_byte_size(text);
        if (!bytes) return fmt::format("expected a whole number of bytes such as 4096, 64KiB or 1GiB, got {}", text);
        text = std::to_string(*bytes);
        return std::string();
      },
      "BYTES");
}

std::string joined(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// "--hw"'s help, the same wherever it is taken: every form load_config accepts.
std::string hw_help(const std::string& more = "") {
  return "Hardware: a preset (" + joined(preset_names()) +
         "), a Cloud TPU accelerator type, which also sets the slice (v4-32, v5p-128, v5e-256, v5litepod-16, v6e-64; "
         "see docs/hardware_format.md), or a hardware JSON file" + more;
}

// One of `choices`, with a suggestion when the text is nearly one of them (CLI::IsMember says
// only that the check failed).
CLI::Validator one_of(std::vector<std::string> choices) {
  const std::string shown = "{" + joined(choices, ",") + "}";
  return CLI::Validator(
      [choices = std::move(choices)](std::string& text) {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return std::string();
        return fmt::format("expected one of {}, got \"{}\"{}", joined(choices), text, did_you_mean(text, choices));
      },
      shown);
}

// --slices N: hw.slice.count, within the bounds the registry gives it.
void add_slices_option(CLI::App& cmd, std::uint32_t& slices, const std::string& help) {
  cmd.add_option("--slices", slices, help)->check(whole_number_of("slices"))->check(CLI::Range(1u, 4096u));
}

void add_config_options(CLI::App& cmd, ConfigRequest& request) {
  cmd.add_option("--hw", request.hw, hw_help())->capture_default_str();
  cmd.add_option("--topology", request.topology, "Slice shape in chips, e.g. 2x2, 4x4, 4x4x4 (default: the preset's)");
  add_slices_option(cmd, request.slices,
                    "Slices of that shape joined by the data-center network, data parallel across them (Cloud TPU "
                    "multislice; default: hw.slice.count, 1)");
  cmd.add_option("--set", request.sets, "Override a key: hw.<path>=VALUE or workload.<path>=VALUE (repeatable; see list-params)")
      ->allow_extra_args(false);
}

int list_params(const std::string& hw_name, bool as_json) {
  const nlohmann::json hw = load_hw_document(hw_name);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& p : param_registry()) {
    nlohmann::json def = p.default_value;
    if (p.doc == "hw") {
      std::string pointer = "/" + p.path;
      std::replace(pointer.begin(), pointer.end(), '.', '/');
      const auto ptr = nlohmann::json::json_pointer(pointer);
      def = hw.contains(ptr) ? hw.at(ptr) : p.default_value;
    }
    nlohmann::ordered_json row = {{"key", p.doc + "." + p.path},
                                  {"type", param_type_name(p.type)},
                                  {"unit", p.unit},
                                  {"default", def},
                                  {"required", p.required && p.doc == "workload"},
                                  {"description", p.description}};
    if (!p.choices.empty()) row["choices"] = p.choices;
    rows.push_back(row);
  }
  if (as_json) {
    std::cout << rows.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("Keys of the hardware (defaults of --hw {}) and workload documents.\n"
                           "Override any with --set KEY=VALUE.\n\n", hw_name);
  // Each column as wide as its longest entry, the description last and unbounded.
  const auto default_text = [](const nlohmann::ordered_json& r) {
    std::string def = r["required"].get<bool>() ? "(required)" : r["default"].dump();
    return def.size() > 40 ? def.substr(0, 37) + "..." : def;
  };
  std::size_t key_width = 0, unit_width = 0, default_width = 0;
  for (const auto& r : rows) {
    key_width = std::max(key_width, r["key"].get<std::string>().size());
    unit_width = std::max(unit_width, r["unit"].get<std::string>().size());
    default_width = std::max(default_width, default_text(r).size());
  }
  for (const auto& r : rows) {
    std::cout << fmt::format("{:<{}} {:<{}} {:<{}} {}\n", r["key"].get<std::string>(), key_width, r["unit"].get<std::string>(),
                             unit_width, default_text(r), default_width, r["description"].get<std::string>());
    if (r.contains("choices"))
      std::cout << fmt::format("{:<{}} one of: {}\n", "", key_width + unit_width + default_width + 3,
                               joined(r["choices"].get<std::vector<std::string>>()));
  }
  return 0;
}

// What a run left in its output directory, every file but the hidden marker, the main results
// first.
std::vector<std::string> files_written(const std::string& dir) {
  const std::vector<std::string> order = {"summary.json", "summary.csv", "effective_config.json", "report.html",
                                          "timeline.json", "trace.json", "trace.json.gz", "command.txt"};
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string()[0] != '.') names.push_back(entry.path().filename().string());
  const auto rank = [&](const std::string& name) { return std::find(order.begin(), order.end(), name) - order.begin(); };
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(rank(a), a) < std::make_pair(rank(b), b);
  });
  return names;
}

// "--trace-chips": "all", or chips and inclusive ranges ("0-3,8"), each inside the slice.
std::vector<std::pair<std::uint32_t, std::uint32_t>> parse_chip_list(const std::string& text, std::uint32_t chip_count) {
  if (text == "all") return {};
  const auto bad = [&](const std::string& why) {
    return InputError(fmt::format("--trace-chips {}: {} (expected all, or chips and ranges such as 0-3,8 of chips 0-{})",
                                  text, why, chip_count - 1));
  };
  if (text.back() == ',') throw bad("an empty item");  // getline would not yield it
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto number = [&](const std::string& digits) {
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
        throw bad(fmt::format("\"{}\" is not a chip or a range of chips", item));
      return static_cast<std::uint32_t>(std::stoul(digits));
    };
    const std::size_t dash = item.find('-');
    const std::uint32_t first = number(item.substr(0, dash));
    const std::uint32_t last = dash == std::string::npos ? first : number(item.substr(dash + 1));
    if (last < first) throw bad(fmt::format("range {} runs backwards", item));
    if (last >= chip_count) throw bad(fmt::format("chip {} is outside the slice", last));
    ranges.emplace_back(first, last);
  }
  if (ranges.empty()) throw bad("no chips");
  return ranges;
}

// "--shape": dimensions separated by commas or x ("8192,4096", "8192x4096").
std::vector<std::uint64_t> parse_shape(std::string text) {
  const auto bad = InputError(fmt::format("op --shape {}: expected dimensions such as 8192,4096", text));
  std::replace(text.begin(), text.end(), 'x', ',');
  if (text.empty() || text.back() == ',') throw bad;  // getline would not yield a trailing empty item
  std::vector<std::uint64_t> shape;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty() || item.size() > 12 || item.find_first_not_of("0123456789") != std::string::npos) throw bad;
    shape.push_back(std::stoull(item));
  }
  return shape;
}

// An error is one line on stderr, whatever the input it quotes holds (a --topology ending in a
// newline made two): control characters are shown escaped. A simulation error's own list of
// findings ("\n  ...") keeps its lines.
std::string one_line(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' && i + 2 < text.size() && text[i + 1] == ' ' && text[i + 2] == ' ') out += '\n';
    else if (c == '\n') out += "\\n";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out;
}

// The command as typed, each argument quoted for a POSIX shell where it needs it.
std::string command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                              "0123456789_-+=/.,:@%") == std::string::npos;
    std::string quoted = "'";
    for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    line += (i ? " " : "") + (plain ? arg : quoted);
  }
  return line;
}

// The subcommand called `name`, or nullptr.
const CLI::App* find_command(const CLI::App& app, const std::string& name) {
  const auto found = app.get_subcommands([&](const CLI::App* sub) { return sub->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

// The names an option of `command` answers to, as typed: "--topology", "-o".
std::vector<std::string> option_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
    for (const auto& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

// The first option of `args` that `command` does not have, named with the one it probably
// meant ("unknown option --topolgy (did you mean --topology?)"); "" when it has them all.
std::string unknown_option(const CLI::App& command, const std::vector<std::string>& args) {
  const std::vector<std::string> known = option_names(command);
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || std::isdigit(static_cast<unsigned char>(arg[1]))) continue;
    // "--name=value", and "-ovalue" for a one-letter option
    const std::string name = arg[1] == '-' ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
    if (std::find(known.begin(), known.end(), name) == known.end())
      return fmt::format("unknown option {}{}", name, did_you_mean(name, known));
  }
  return "";
}

// A command-line error in tpusim's own words, as every other error: one line, lower case, the
// subcommand named, a suggestion where a name is nearly right, and where its help is.
std::string command_line_error(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  const CLI::App* command = &app;
  std::string who = "tpusim";
  if (argc > 1 && argv[1][0] != '-' && find_command(app, argv[1])) {
    command = find_command(app, argv[1]);
    who += " " + command->get_name();
  }
  std::string what = error.what();
  static const std::regex missing_value(R"(^(\S+): (\d+) required \S+ missing$)");
  std::smatch match;
  if (const std::string unknown = unknown_option(*command, {argv + (command == &app ? 1 : 2), argv + argc}); !unknown.empty()) {
    what = unknown;  // whatever else went wrong, probably because of this
  } else if (dynamic_cast<const CLI::ExtrasError*>(&error)) {
    std::vector<std::string> extras = command->remaining();
    for (auto& extra : extras) extra = "\"" + extra + "\"";
    what = fmt::format("unexpected argument{} {}", extras.size() == 1 ? "" : "s", joined(extras, " "));
  } else if (dynamic_cast<const CLI::RequiredError*>(&error) && command == &app) {
    what = "a command is required";
  } else if (std::regex_match(what, match, missing_value)) {
    what = fmt::format("{} needs {}", match[1].str(), match[2] == "1" ? "a value" : match[2].str() + " values");
  } else if (what.size() > 1 && std::isupper(static_cast<unsigned char>(what[0])) &&
             std::islower(static_cast<unsigned char>(what[1]))) {  // a sentence, not a name such as "K"
    what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
  }
  return fmt::format("{}: error: {}; see {} --help", who, one_line(what), who);
}

// ---- the subcommands: each binds its options to its own members and runs ---------------------

const char* const kAllChipsHelp =
    "Simulate every chip. By default a symmetric slice simulates one chip per class of symmetric chips, which "
    "gives the same outputs (see docs/model.md) in a fraction of the time";
const char* const kMaxMemoryHelp = "Refuse to start when the estimated memory exceeds SIZE (e.g. 4G; default: this machine's memory)";

// How a failed command ends: one line on stderr and its exit code (2: bad input; 1: the
// simulation failed, or the machine refused, as a full disk does; or an internal error).
int input_failure(const InputError& e) {
  std::cerr << "tpusim: error: " << one_line(e.what()) << "\n";
  return 2;
}
int simulation_failure(const SimError& e) {
  std::cerr << "tpusim: simulation error: " << one_line(e.what()) << "\n";
  return 1;
}
int system_failure(const std::system_error& e) {  // not tpusim's fault
  std::cerr << "tpusim: error: " << one_line(e.what()) << "\n";
  return 1;
}
int internal_failure(const std::exception& e) {
  std::cerr << "tpusim: internal error: " << one_line(e.what()) << "\n";
  return 1;
}

// Each command's run() is a function-try-block ending in these handlers, so that a failure is
// handled in the frame that holds the command's locals: an exception leaving a frame with locals
// to destroy resumes unwinding, and under AddressSanitizer, after SystemC's coroutines have run,
// that step trips over stale poison (sim/stale_stack.hpp), as do the handlers' own calls until
// it is cleared.
#define TPUSIM_COMMAND_FAILURES                                                        \
  catch (const InputError& e) { clear_stale_stack_poison(); return input_failure(e); }     \
  catch (const SimError& e) { clear_stale_stack_poison(); return simulation_failure(e); }  \
  catch (const std::system_error& e) { clear_stale_stack_poison(); return system_failure(e); } \
  catch (const std::exception& e) { clear_stale_stack_poison(); return internal_failure(e); }

// A subcommand: add() registers it on the app with its options bound to the command's members;
// run() does its work once the command line is parsed into them.
class Command {
 public:
  virtual ~Command() = default;
  virtual void add(CLI::App& app) = 0;
  virtual int run(int argc, char** argv) = 0;
  bool chosen() const { return sub_ != nullptr && static_cast<bool>(*sub_); }

 protected:
  bool hw_given() const { return sub_->get_option("--hw")->count() > 0; }
  // --json and --max-memory, as the single-measurement commands take them.
  void add_json_and_memory_options() {
    sub_->add_flag("--json", json_, "Print one JSON object");
    sub_->add_option("--max-memory", max_memory_, kMaxMemoryHelp);
  }
  std::uint64_t max_memory_bytes() const { return max_memory_.empty() ? 0 : parse_memory_size(max_memory_, "--max-memory"); }
  // The result as one JSON object (--json) or as `format` words it.
  int print(const nlohmann::ordered_json& result, std::string (*format)(const nlohmann::ordered_json&)) const {
    std::cout << (json_ ? result.dump(2) + "\n" : format(result));
    return 0;
  }

  CLI::App* sub_ = nullptr;
  bool json_ = false;
  std::string max_memory_;
};

class RunCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("run", "Simulate training steps of a workload and write summary, trace and config");
    sub_->add_option("workload", config_.workload_path, "Workload JSON file")->required();
    add_config_options(*sub_, config_);
    sub_->add_option("-o,--out", options_.out_dir, "Output directory (default: out/<workload name>)");
    sub_->add_flag("--force", options_.force, "Replace the output directory if it exists");
    sub_->add_option("--trace", trace_level_, "Trace detail: none, steps (a slice per step), ops (+ op engines, collectives, links) or tiles (+ every MXU, VPU and DMA transaction)")
        ->check(one_of({"none", "steps", "ops", "tiles"}))
        ->capture_default_str();
    sub_->add_option("--trace-chips", trace_chips_,
                     fmt::format("Only these chips' tracks, e.g. 0-3,8 or all (default: all on slices of up to {} chips, "
                                 "chips 0-{} of larger ones)", kDefaultTracedChips, kDefaultTracedChips - 1));
    sub_->add_option("--trace-units", trace_units_, "Only these kinds of track, comma-separated: " + joined(selectable_unit_kinds()));
    sub_->add_option("--trace-window", trace_window_, "Only slices overlapping START:END, in microseconds of simulated time");
    sub_->add_flag("--trace-gzip", options_.trace_gzip, "Write trace.json.gz instead of trace.json");
    sub_->add_flag("--all-chips", options_.all_chips, kAllChipsHelp);
    sub_->add_option("--max-memory", max_memory_, kMaxMemoryHelp);
  }

  int run(int argc, char** argv) override try {
    config_.hw_given = hw_given();
    options_.command_line = command_line(argc, argv);
    const Config config = load_config(config_);
    install_interrupt_handlers();
    if (options_.out_dir.empty()) options_.out_dir = "out/" + config.workload.name;
    if (!max_memory_.empty()) options_.max_memory_bytes = parse_memory_size(max_memory_, "--max-memory");
    options_.trace.level = trace_level_ == "none"    ? TraceLevel::None
                              : trace_level_ == "steps" ? TraceLevel::Steps
                              : trace_level_ == "tiles" ? TraceLevel::Tiles
                                                       : TraceLevel::Ops;
    std::stringstream kinds(trace_units_);
    const std::vector<std::string> kind_names = selectable_unit_kinds();
    for (std::string k; std::getline(kinds, k, ',');) {
      if (k.empty()) continue;
      bool known = false;
      for (const UnitKindTraits& kind : unit_kinds())
        if (kind.selectable && k == kind.name) {
          options_.trace.kinds.push_back(kind.kind);
          known = true;
        }
      if (!known)
        throw InputError(fmt::format("--trace-units {}: unknown kind \"{}\"{} (one of {})", trace_units_, k,
                                     did_you_mean(k, kind_names), joined(kind_names)));
    }
    if (!trace_window_.empty()) {
      double from = 0, to = 0;
      char colon = 0;
      std::stringstream w(trace_window_);
      if (!(w >> from >> colon >> to) || colon != ':' || from < 0 || to <= from || !w.eof())
        throw InputError(fmt::format("--trace-window {}: expected START:END in microseconds, START < END", trace_window_));
      // Beyond 2^63 ps (106 days of simulated time) a bound means "no bound": converting it would overflow.
      auto to_ps = [](double us) {
        return us * 1e6 >= 9.2e18 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(us * 1e6);
      };
      options_.trace.begin_ps = to_ps(from);
      options_.trace.end_ps = to_ps(to);
    }
    const std::uint32_t chip_count = static_cast<std::uint32_t>(config.hw.chip_count());
    options_.trace.chips = trace_chips_.empty() ? default_traced_chips(chip_count) : parse_chip_list(trace_chips_, chip_count);
    options_.trace_chips_given = !trace_chips_.empty();
    const auto summary = run_simulation(config, options_);
    std::cout << format_summary(summary);
    const std::string trace_name = options_.trace_gzip ? "trace.json.gz" : "trace.json";
    std::cout << fmt::format("  outputs        {}/ ({})\n", options_.out_dir, joined(files_written(options_.out_dir)));
    if (summary.ran() && summary.simulation.representatives)
      std::cout << fmt::format("  simulated      {} of {} chips, each standing for {}{} symmetric ones (--all-chips for every chip)\n",
                               summary.simulation.chips_simulated, chip_count,
                               summary.simulation.chips_simulated * summary.simulation.stands_for_at_most == chip_count ? "" : "up to ",
                               summary.simulation.stands_for_at_most);
    else if (!options_.trace.chips.empty() && std::filesystem::exists(options_.out_dir + "/" + trace_name))
      std::cout << fmt::format("  trace          chips {} of {} (--trace-chips all for every chip)\n",
                               chip_list_string(options_.trace.chips), chip_count);
    // A signal that came after the last step interrupted nothing: the outputs are complete and
    // say "ok", and so does the exit code.
    if (const int sig = interrupt_signal(); sig != 0 && summary.interrupted()) {
      // The simulation's threads were abandoned mid-step, their stacks never unwind: leave
      // without the exit-time teardown (and LeakSanitizer's count) that would walk them.
      std::cout.flush();
      std::cerr.flush();
      std::_Exit(128 + sig);
    }
    return 0;
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ConfigRequest config_;
  RunOptions options_;
  std::string trace_level_ = "ops", trace_units_, trace_window_, trace_chips_;
};

class ListParamsCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("list-params", "List every configuration key with unit, default and description");
    sub_->add_option("--hw", hw_, hw_help(": its values are shown as the hardware defaults"))->capture_default_str();
    sub_->add_flag("--json", json_, "Print JSON");
  }
  int run(int, char**) override try {
    return list_params(hw_, json_);
  }
  TPUSIM_COMMAND_FAILURES

 private:
  std::string hw_ = "tpu_v2";
};

class DumpConfigCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("dump-config", "Print the effective configuration (JSON) without simulating");
    sub_->add_option("workload", config_.workload_path, "Workload JSON file (optional)");
    add_config_options(*sub_, config_);
  }
  int run(int, char**) override try {
    config_.hw_given = hw_given();
    const Config config = load_config(config_);
    std::cout << effective_config(config).dump(2) << "\n";
    return 0;
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ConfigRequest config_;
};

class GemmCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("gemm", "One TensorCore runs one M x K @ K x N matmul with operands in HBM");
    const CLI::Validator whole_number = whole_number_of("elements");
    sub_->add_option("M", request_.m, "Rows of the result (streamed through the MXU)")->required()->check(whole_number);
    sub_->add_option("N", request_.n, "Columns of the result")->required()->check(whole_number);
    sub_->add_option("K", request_.k, "Contracted dimension")->required()->check(whole_number);
    sub_->add_option("--hw", config_.hw, hw_help(" (one core of it runs the matmul)"))->capture_default_str();
    sub_->add_option("--set", config_.sets, "Override a hardware key: hw.<path>=VALUE (repeatable)");
    sub_->add_option("--dtype", dtype_, "Operand type")->check(one_of({"bf16", "fp32", "int8", "fp8"}))->capture_default_str();
    sub_->add_option("--precision", precision_, "fp32 only: bf16 passes, default 1, high 3, highest 6")
        ->check(one_of({"default", "high", "highest"}))->capture_default_str();
    sub_->add_option("--array", array_, "Override the MXU shape, e.g. 128x128");
    sub_->add_option("--block", block_, "Force the vector-memory block BMxBKxBN (default: the largest that fits)");
    sub_->add_option("--mxus", mxus_, "Override the MXUs per core")->check(CLI::Range(1, 16));
    sub_->add_option("--cores", request_.cores, "TensorCores of the chip running the same matmul at once, sharing its HBM")->check(whole_number_of(""))
        ->capture_default_str();
    sub_->add_flag("--scalesim-compat", request_.scalesim_compat,
                   "SCALE-Sim's assumptions: compute cycles only, no weight double-buffering, no fold overlap");
    sub_->add_flag("--compute-only", request_.compute_only, "tpusim's MXU timing alone: no memory system, one block");
    add_json_and_memory_options();
  }

  int run(int, char**) override try {
    if (!array_.empty()) {
      const auto x = array_.find('x');
      if (x == std::string::npos) throw InputError(fmt::format("--array {}: expected ROWSxCOLS, e.g. 128x128", array_));
      config_.sets.push_back("hw.core.mxu.rows=" + array_.substr(0, x));
      config_.sets.push_back("hw.core.mxu.cols=" + array_.substr(x + 1));
    }
    if (!block_.empty()) {
      unsigned long long bm = 0, bk = 0, bn = 0;
      char tail = 0;
      if (std::sscanf(block_.c_str(), "%llux%llux%llu%c", &bm, &bk, &bn, &tail) != 3 || !bm || !bk || !bn)
        throw InputError(fmt::format("--block {}: expected BMxBKxBN, e.g. 512x1024x1024", block_));
      request_.block_m = bm;
      request_.block_k = bk;
      request_.block_n = bn;
    }
    if (mxus_ > 0) config_.sets.push_back(fmt::format("hw.core.mxu.per_core={}", mxus_));
    const Config config = load_config(config_);
    request_.dtype = dtype_ == "fp32" ? DType::F32 : dtype_ == "int8" ? DType::Int8 : dtype_ == "fp8" ? DType::Fp8 : DType::BF16;
    if (precision_ != "default" && request_.dtype != DType::F32)
      throw InputError("--precision: only fp32 matmuls take several bf16 passes");
    request_.passes = precision_ == "default" ? 1 : precision_ == "high" ? 3 : 6;
    request_.max_memory_bytes = max_memory_bytes();
    return print(run_gemm(config.hw, request_), format_gemm);
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ConfigRequest config_;
  GemmRequest request_;
  std::string dtype_ = "bf16", precision_ = "default", array_, block_;
  std::uint32_t mxus_ = 0;
};

class OpCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("op", "One TensorCore runs one vector op (elementwise, activation, softmax, normalization) on a tensor in HBM");
    sub_->add_option("KIND", request_.kind, "The op")->required()->check(one_of(vector_op_kinds()));
    sub_->add_option("--shape", shape_, "The input tensor's dimensions, e.g. 8192,4096 (each input's, for add and mul)")->required();
    sub_->add_option("--dtype", dtype_, "Element type in HBM (the vector unit computes in fp32)")
        ->check(one_of({"bf16", "fp32"}))->capture_default_str();
    sub_->add_option("--hw", config_.hw, hw_help(" (one core of it runs the op)"))->capture_default_str();
    sub_->add_option("--set", config_.sets, "Override a hardware key: hw.<path>=VALUE (repeatable)");
    sub_->add_option("--cores", request_.cores, "TensorCores of the chip running the same op at once, sharing its HBM")->check(whole_number_of(""))
        ->capture_default_str();
    add_json_and_memory_options();
  }

  int run(int, char**) override try {
    request_.shape = parse_shape(shape_);
    const Config config = load_config(config_);
    request_.dtype = dtype_ == "fp32" ? DType::F32 : DType::BF16;
    request_.max_memory_bytes = max_memory_bytes();
    return print(run_vector_op(config.hw, request_), format_vector_op);
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ConfigRequest config_;
  VectorOpRequest request_;
  std::string shape_, dtype_ = "bf16";
};

class MembenchCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("membench", "Requesters read or write one chip's HBM; achieved bandwidth, latency, row hits");
    sub_->add_option("--hw", config_.hw, hw_help(" (one chip's HBM is measured)"))->capture_default_str();
    sub_->add_option("--set", config_.sets, "Override a hardware key: hw.<path>=VALUE (repeatable)");
    sub_->add_option("--pattern", pattern_, "stream-read, stream-write, copy (1 read : 1 write), triad (2 reads : 1 write), random (reads) or random-write")
        ->check(one_of({"stream-read", "stream-write", "copy", "triad", "random", "random-write"}))->capture_default_str();
    sub_->add_option("--bytes", request_.bytes, "Bytes moved in all, reads plus writes")->transform(byte_size())->capture_default_str();
    sub_->add_option("--request-bytes", request_.request_bytes, "Size of each request")->transform(byte_size())->capture_default_str();
    sub_->add_option("--requesters", request_.requesters, "Independent requesters (each its own stream)")->check(whole_number_of(""))->capture_default_str();
    sub_->add_option("--outstanding", request_.outstanding, "Requests each requester keeps in flight")->check(whole_number_of(""))->capture_default_str();
    sub_->add_option("--footprint-bytes", request_.footprint_bytes, "random, random-write: addresses are drawn from [0, footprint)")->transform(byte_size())->capture_default_str();
    sub_->add_option("--seed", request_.seed, "random, random-write: first requester's splitmix64 seed (the k-th uses seed + k)")->check(whole_number_of(""))->capture_default_str();
    sub_->add_flag("--json", json_, "Print one JSON object");
  }

  int run(int, char**) override try {
    const Config config = load_config(config_);
    request_.pattern = parse_mem_pattern(pattern_);
    return print(run_membench(config.hw, request_), format_membench);
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ConfigRequest config_;
  MembenchRequest request_;
  std::string pattern_ = "stream-read";
};

class CollectiveCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("collective", "Simulate one collective over the chips of a slice (one rank per chip)");
    sub_->add_option("--op", op_, "Collective")->check(one_of({"all-reduce", "reduce-scatter", "all-gather", "permute", "all-to-all"}))
        ->capture_default_str();
    sub_->add_option("--bytes", request_.spec.bytes, "Size of the whole buffer (all-reduce in and out, reduce-scatter in, all-gather out, each chip's in an all-to-all)")->transform(byte_size())
        ->required();
    sub_->add_option("--hw", config_.hw, hw_help())->capture_default_str();
    sub_->add_option("--topology", config_.topology, "Slice shape in chips, e.g. 4x4 (default: the preset's)");
    sub_->add_option("--set", config_.sets, "Override a hardware key: hw.<path>=VALUE (repeatable)");
    add_slices_option(*sub_, config_.slices,
                      "Slices the group also spans over the data-center network: a reduction's ICI stage, then an "
                      "all-reduce with the chips' peers in the other slices (default 1)");
    sub_->add_option("--algorithm", algorithm_, "The algorithm: " + collective_algorithms_described())
        ->check(one_of(collective_algorithm_names()))->capture_default_str();
    sub_->add_option("--group", group_, "Replica groups: all, or the torus axes a group spans (x, y, xy, ...)")
        ->capture_default_str();
    sub_->add_option("--chunk-bytes", request_.spec.chunk_bytes, "Pieces a ring step is sent in, pipelined with the reduction (0: one)")->transform(byte_size());
    sub_->add_option("--dtype", dtype_, "Element type of the reduction")->check(one_of({"f32", "bf16"}))
        ->capture_default_str();
    sub_->add_option("--concurrent", request_.concurrent, "Identical collectives in flight at once, sharing the links")->check(whole_number_of(""))
        ->capture_default_str();
    sub_->add_flag("--links", request_.list_links, "List every used link's utilization (with --json)");
    sub_->add_flag("--json", json_, "Print one JSON object");
    sub_->add_flag("--all-chips", request_.all_chips, kAllChipsHelp);
    sub_->add_option("--max-memory", max_memory_, kMaxMemoryHelp);
  }

  int run(int, char**) override try {
    config_.hw_given = hw_given();
    const Config config = load_config(config_);
    request_.spec.kind = op_ == "all-reduce"       ? CollectiveKind::AllReduce
                         : op_ == "reduce-scatter" ? CollectiveKind::ReduceScatter
                         : op_ == "permute"        ? CollectiveKind::Permute
                         : op_ == "all-to-all"     ? CollectiveKind::AllToAll
                                                   : CollectiveKind::AllGather;
    request_.spec.algorithm = parse_collective_algorithm(algorithm_);
    // An all-to-all has one algorithm, axis by axis (hw/collective.cpp): say so rather than echo --algorithm.
    if (request_.spec.kind == CollectiveKind::AllToAll) request_.spec.algorithm = CollectiveAlgorithm::Torus;
    request_.spec.group_axes = parse_group(group_);
    request_.named_axes = group_ != "all";
    request_.spec.dtype = dtype_ == "bf16" ? DType::BF16 : DType::F32;
    request_.max_memory_bytes = max_memory_bytes();
    return print(run_collective(config.hw, request_), format_collective);
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ConfigRequest config_;
  CollectiveRequest request_;
  std::string op_ = "all-reduce", algorithm_ = "torus_all_axes", group_ = "all", dtype_ = "f32";
};

class HloCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("hlo", "Simulate an XLA HLO module (a compiled step as JAX, TensorFlow or PyTorch/XLA print it) on every device of a slice");
    sub_->add_option("file", request_.file, "HLO text: jax.jit(f).lower(...).compile().as_text(), or a module XLA_FLAGS=--xla_dump_to wrote")->required();
    sub_->add_option("--hw", config_.hw, hw_help())->capture_default_str();
    sub_->add_option("--topology", config_.topology, "Slice shape in chips, one per device of the module (default: the preset's)");
    sub_->add_option("--set", config_.sets, "Override a hardware key: hw.<path>=VALUE (repeatable)");
    sub_->add_flag("--json", json_, "Print one JSON object");
    sub_->add_option("-o,--out", request_.out_dir, "Output directory for summary.json and trace.json (default: print only)");
    sub_->add_flag("--force", request_.force, "Replace an output directory an earlier tpusim command wrote");
    sub_->add_option("--trace", trace_, "Trace detail with -o: none or ops (op engines, collectives, links)")->check(one_of({"none", "ops"}))
        ->capture_default_str();
    sub_->add_flag("--all-chips", request_.all_chips, kAllChipsHelp);
    sub_->add_option("--max-memory", max_memory_, kMaxMemoryHelp);
  }

  int run(int argc, char** argv) override try {
    config_.hw_given = hw_given();
    const Config config = load_config(config_);
    request_.max_memory_bytes = max_memory_bytes();
    request_.trace = trace_ != "none";
    request_.command_line = command_line(argc, argv);
    return print(run_hlo(config.hw, request_), format_hlo);
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ConfigRequest config_;
  HloRequest request_;
  std::string trace_ = "ops";
};

class SweepCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("sweep", "Run a workload over the product of varied keys, in parallel, into one table and report");
    sub_->add_option("workload", request_.workload_path, "Workload JSON file")->required();
    sub_->add_option("--vary", varies_, "KEY=V1,V2,...: a workload.* or hw.* key and its values (repeatable; the first varies slowest)");
    sub_->add_option("--hw", hw_, hw_help("; several, comma-separated, vary it"))->capture_default_str();
    sub_->add_option("--topology", topology_, "Slice shape; several, comma-separated, vary it");
    sub_->add_option("--slices", slices_,
                     "Slices joined by the data-center network (hw.slice.count); several, comma-separated, vary it");
    sub_->add_option("--set", request_.sets, "Fixed override for every point (repeatable)");
    sub_->add_option("-o,--out", request_.out_dir, "Output directory (default: out/sweep_<workload file name>)");
    request_.jobs = 0;
    sub_->add_option("-j,--jobs", request_.jobs, "Points run at once (default: the number of cores)")->check(whole_number_of(""));
    sub_->add_flag("--resume", request_.resume, "Keep the points an interrupted sweep into the same directory finished");
    sub_->add_flag("--force", request_.force, "Replace the output directory");
    sub_->add_option("--max-memory", request_.max_memory, "Refuse each point whose estimated memory exceeds SIZE (e.g. 4G)");
    sub_->add_option("--shard", shard_, "K/N: run only the K-th of N shards of the points (join them with `tpusim merge`)");
    sub_->add_option("--trace", request_.trace, "Trace of each point: none, steps, ops or tiles")->check(one_of({"none", "steps", "ops", "tiles"}))
        ->capture_default_str();
  }

  int run(int, char**) override try {
    request_.hw_given = hw_given();
    // --hw and --topology lists vary like any key; a single value is fixed.
    auto list = [](const std::string& text) {
      std::vector<std::string> out;
      std::stringstream ss(text);
      for (std::string v; std::getline(ss, v, ',');)
        if (!v.empty()) out.push_back(v);
      return out;
    };
    const auto hws = list(hw_), topologies = list(topology_);
    if (hws.size() > 1) request_.axes.push_back({"hw", hws});
    if (topologies.size() > 1) request_.axes.push_back({"topology", topologies});
    const auto slices = list(slices_);
    if (slices.size() > 1) request_.axes.push_back({"hw.slice.count", slices});
    if (slices.size() == 1) request_.sets.push_back("hw.slice.count=" + slices[0]);
    for (const auto& v : varies_) request_.axes.push_back(parse_vary(v));
    if (hws.size() == 1) request_.fixed_hw = hws[0];
    if (topologies.size() == 1) request_.fixed_topology = topologies[0];
    if (!request_.max_memory.empty()) parse_memory_size(request_.max_memory, "--max-memory");
    if (request_.jobs == 0) request_.jobs = std::max(1u, std::thread::hardware_concurrency());
    if (request_.out_dir.empty()) request_.out_dir = "out/sweep_" + std::filesystem::path(request_.workload_path).stem().string();
    if (!shard_.empty()) std::tie(request_.shard_index, request_.shard_count) = parse_shard(shard_);
    request_.self_exe = std::filesystem::read_symlink("/proc/self/exe").string();
    install_interrupt_handlers();
    const int failed = run_sweep(request_);
    if (interrupt_signal() != 0) return 128 + interrupt_signal();
    return failed == 0 ? 0 : 1;
  }
  TPUSIM_COMMAND_FAILURES

 private:
  SweepRequest request_;
  std::vector<std::string> varies_;
  std::string hw_ = "tpu_v2", topology_, slices_, shard_;
};

class MergeCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("merge", "Join the output directories of the shards of one sweep into one sweep");
    sub_->add_option("dirs", dirs_, "Output directories of `tpusim sweep --shard K/N`")->required();
    sub_->add_option("-o,--out", out_, "Output directory of the joined sweep")->required();
    sub_->add_flag("--force", force_, "Replace the output directory");
  }
  int run(int, char**) override try {
    return merge_sweeps(dirs_, out_, force_) == 0 ? 0 : 1;
  }
  TPUSIM_COMMAND_FAILURES

 private:
  std::vector<std::string> dirs_;
  std::string out_;
  bool force_ = false;
};

// trace-check and trace-summary: a trace read whole, then checked or summarised.
class TraceCommand : public Command {
 public:
  explicit TraceCommand(bool summary) : summary_(summary) {}
  void add(CLI::App& app) override {
    if (!summary_) {
      sub_ = app.add_subcommand("trace-check", "Validate a trace: fields, named tracks, nesting, flows, counters");
      sub_->add_option("trace", file_, "Trace JSON file")->required();
      return;
    }
    sub_ = app.add_subcommand("trace-summary", "Print a trace's top ops and each track's busy time");
    sub_->add_option("trace", file_, "Trace JSON file")->required();
    sub_->add_option("--top", top_, "How many ops to list")->check(whole_number_of(""))->capture_default_str();
  }

  int run(int, char**) override try {
    check_input_file(file_, 0);
    // The parsed trace takes about 9 times its text (a 165 MB trace of tiles peaked at 1.42 GB):
    // a trace, or a small gzip file inflating to one, that would not fit is refused as it is read.
    // (a pair, not a structured binding: C++17 lambdas cannot capture those, and clang refuses)
    const std::pair<std::uint64_t, std::string> memory = memory_limit(0);
    constexpr std::uint64_t kParsedBytesPerTextByte = 9;
    const std::uint64_t max_text_bytes = memory.first / kParsedBytesPerTextByte;
    TraceFileBuf buf(file_, max_text_bytes);
    if (!buf.good()) throw InputError(fmt::format("{}: cannot read the file", file_));
    const auto too_large = [&] {
      return InputError(fmt::format("{}: more than {} bytes of text{}; read whole, as tpusim reads a trace, it would "
                                    "need more than {} ({})",
                                    file_, max_text_bytes, buf.compressed() ? " once inflated" : "",
                                    size_text(static_cast<double>(memory.first)), memory.second));
    };
    std::istream in(&buf);
    nlohmann::json trace;
    try {
      trace = parse_bounded(in, file_);
    } catch (const JsonTooDeep&) {
      if (!summary_) {
        std::cout << fmt::format("{}: invalid: nested deeper than {} levels\n", file_, kMaxJsonDepth);
        return 1;
      }
      throw;
    } catch (const nlohmann::json::exception& e) {  // syntax, or a number beyond a double
      if (buf.too_large()) throw too_large();
      // A gzip stream that broke off: say that, not what the parser saw of it.
      const std::string what = buf.error().empty() ? fmt::format("not JSON ({})", e.what())
                                                   : fmt::format("a corrupt gzip file ({})", buf.error());
      if (!summary_) {
        std::cout << fmt::format("{}: invalid: {}\n", file_, what);
        return 1;
      }
      throw InputError(fmt::format("{}: {}", file_, buf.error().empty() ? "malformed JSON" : what));
    }
    if (buf.too_large()) throw too_large();
    if (!buf.error().empty()) {  // the JSON ended before the damage (a bad checksum at the end)
      if (!summary_) {
        std::cout << fmt::format("{}: invalid: a corrupt gzip file ({})\n", file_, buf.error());
        return 1;
      }
      throw InputError(fmt::format("{}: a corrupt gzip file ({})", file_, buf.error()));
    }
    const TraceCheck r = check_trace(trace);
    if (summary_) {
      // Any trace is summarised, but a summary of a broken one must say so.
      if (r.problems.size() == 1 && r.events == 0 && r.problems[0].rfind("not a trace", 0) == 0)
        throw InputError(fmt::format("{}: {}", file_, r.problems[0]));
      if (!r.problems.empty())
        std::cerr << fmt::format("tpusim: warning: {}: {} problem(s), e.g. {}; events of the wrong shape are left out "
                                 "(tpusim trace-check names them all)\n",
                                 file_, r.problems.size() == 50 ? "50 or more" : std::to_string(r.problems.size()),
                                 one_line(r.problems[0]));
      std::cout << summarize_trace(trace, top_);
      return 0;
    }
    if (r.problems.empty()) {
      std::cout << fmt::format("{}: valid: {} events, {} slices on {} tracks of {} processes\n", file_, r.events,
                               r.slices, r.tracks, r.processes);
      return 0;
    }
    std::cout << fmt::format("{}: invalid: {} problem(s)\n", file_, r.problems.size());
    for (const auto& p : r.problems) std::cout << "  " << p << "\n";
    return 1;
  }
  TPUSIM_COMMAND_FAILURES

 private:
  bool summary_;
  std::string file_;
  std::size_t top_ = 20;
};

class ImportCommand : public Command {
 public:
  void add(CLI::App& app) override {
    sub_ = app.add_subcommand("import", "Write a model another tool wrote (ONNX, Keras model JSON) as a tpusim workload file");
    sub_->add_option("file", request_.file, "The model: an .onnx file (torch.onnx.export) or Keras model JSON (model.to_json())")->required();
    sub_->add_option("-o,--out", request_.out, "Workload file to write")->required();
    sub_->add_option("--per-replica-batch", request_.per_replica_batch, "training.per_replica_batch of the workload")
        ->check(whole_number_of("samples"))->capture_default_str();
    sub_->add_flag("--force", request_.force, "Replace the output file if an earlier tpusim import wrote it");
  }
  int run(int, char**) override try {
    std::cout << run_import(request_);
    return 0;
  }
  TPUSIM_COMMAND_FAILURES

 private:
  ImportRequest request_;
};

int parse_and_run(int argc, char** argv) {
  CLI::App app{"tpusim: a cycle-approximate simulator of data-parallel training on TPU slices"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);
  // In the order `tpusim --help` lists them.
  RunCommand run;
  ListParamsCommand list_params_command;
  DumpConfigCommand dump;
  GemmCommand gemm;
  OpCommand op;
  MembenchCommand membench;
  CollectiveCommand collective;
  HloCommand hlo;
  SweepCommand sweep;
  MergeCommand merge;
  TraceCommand check(false), summary(true);
  ImportCommand import;
  const std::vector<Command*> commands = {&run, &list_params_command, &dump, &gemm, &op, &membench, &collective,
                                          &hlo, &sweep, &merge, &check, &summary, &import};
  for (Command* command : commands) command->add(app);

  if (argc > 1 && argv[1][0] != '-' && !find_command(app, argv[1])) {
    std::vector<std::string> known;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) known.push_back(sub->get_name());
    std::cerr << fmt::format("tpusim: error: unknown command \"{}\"{}; the commands are {}; see tpusim --help\n",
                             one_line(argv[1]), did_you_mean(argv[1], known), joined(known));
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << command_line_error(app, e, argc, argv) << "\n";
    return 2;
  }

  try {
    for (Command* command : commands)
      if (command->chosen()) return command->run(argc, argv);
    return 2;  // app.require_subcommand(1) leaves none unchosen
  }
  TPUSIM_COMMAND_FAILURES
}

}  // namespace

int cli_main(int argc, char** argv) {
  // SystemC prints a banner on stdout when its kernel starts; results go to stdout.
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  const int code = parse_and_run(argc, argv);
  // Results printed into a full disk or a closed pipe are lost: say so rather than exit 0.
  errno = 0;
  std::cout.flush();
  if (!std::cout && code == 0) {
    std::cerr << "tpusim: error: writing to standard output failed" << (errno ? std::string(": ") + std::strerror(errno) : "")
              << "\n";
    return 1;
  }
  return code;
}

}  // namespace tpusim
