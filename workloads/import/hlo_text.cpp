#include "workloads/import/hlo_text.hpp"

#include <cctype>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpusim {
namespace {

constexpr std::size_t kMaxLineBytes = 16 << 20;
constexpr std::size_t kMaxInstructions = 2'000'000;
constexpr int kMaxNesting = 64;
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 48;  // an array's; far beyond any device's memory

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string strip_percent(std::string s) {
  if (!s.empty() && s[0] == '%') s.erase(0, 1);
  return s;
}

// XLA prints /*index=5*/ inside long tuples; quoted text (metadata) keeps its characters.
std::string strip_comments(const std::string& line) {
  if (line.find("/*") == std::string::npos) return line;
  std::string out;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) out += line[++i];
      else if (c == '"') quoted = false;
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '/' && i + 1 < line.size() && line[i + 1] == '*') {
      const auto end = line.find("*/", i + 2);
      if (end == std::string::npos) return out;  // an unclosed comment: the rest of the line
      i = end + 1;
      continue;
    }
    out += c;
  }
  return out;
}

// The tables newer XLA prints between the header and the computations (stack frames of the
// instructions' metadata): their names, then numbered rows.
bool is_table_line(const std::string& line) {
  return line == "FileNames" || line == "FunctionNames" || line == "FileLocations" || line == "StackFrames" ||
         std::isdigit(static_cast<unsigned char>(line[0]));
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

class LineParser {
 public:
  LineParser(const std::string& line, const std::string& origin, std::size_t number) : s_(line), origin_(origin), line_(number) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}:{}: {}", origin_, line_, what));
  }
  bool done() const { return pos_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[pos_]; }
  void skip_spaces() {
    while (!done() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool consume(char c) {
    skip_spaces();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const char* where) {
    if (!consume(c)) fail(fmt::format("expected '{}' {}", c, where));
  }
  std::string name() {
    skip_spaces();
    const std::size_t start = pos_;
    if (peek() == '%') ++pos_;
    while (!done() && is_name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a name");
    return strip_percent(s_.substr(start, pos_ - start));
  }

  HloShape shape(int depth = 0) {
    if (depth > kMaxNesting) fail("shapes nested too deep");
    skip_spaces();
    HloShape out;
    if (consume('(')) {
      if (consume(')')) return out;
      do out.elements.push_back(shape(depth + 1));
      while (consume(','));
      expect(')', "closing a tuple shape");
      return out;
    }
    const std::size_t start = pos_;
    while (!done() && (std::isalnum(static_cast<unsigned char>(s_[pos_])))) ++pos_;
    out.dtype = s_.substr(start, pos_ - start);
    if (out.dtype.empty()) fail("expected a shape such as f32[8,128]");
    if (!hlo_dtype_bytes(out.dtype)) fail(fmt::format("unknown element type \"{}\"", out.dtype));
    if (peek() != '[') fail(fmt::format("expected [dimensions] after {}", out.dtype));
    ++pos_;
    skip_spaces();
    if (peek() != ']') {
      do {
        skip_spaces();
        if (s_.compare(pos_, 2, "<=") == 0) pos_ += 2;  // a dynamic dimension: its bound
        const std::size_t d0 = pos_;
        while (!done() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
        if (pos_ == d0 || pos_ - d0 > 15) fail(fmt::format("expected a dimension size in the shape of {}", out.dtype));
        out.dims.push_back(std::stoll(s_.substr(d0, pos_ - d0)));
      } while (consume(','));
    }
    expect(']', "closing the dimensions");
    std::uint64_t elements = 1;
    for (auto d : out.dims)
      if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(d), &elements) || elements > kMaxElements)
        fail(fmt::format("a shape of more than {} elements", kMaxElements));
    if (peek() == '{') skip_balanced();  // the layout
    return out;
  }

  // Past a balanced {...}, (...) or [...] group, quotes respected; returns its text.
  std::string skip_balanced() {
    const std::size_t start = pos_;
    int depth = 0;
    bool quoted = false;
    for (; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (quoted) {
        if (c == '\\') ++pos_;
        else if (c == '"') quoted = false;
        continue;
      }
      if (c == '"') quoted = true;
      else if (c == '{' || c == '(' || c == '[') {
        if (++depth > kMaxNesting) fail("brackets nested too deep");
      } else if (c == '}' || c == ')' || c == ']') {
        if (--depth == 0) {
          ++pos_;
          return s_.substr(start, pos_ - start);
        }
      }
    }
    fail("unbalanced brackets (a truncated line?)");
  }

  // Pieces separated by commas outside brackets and quotes, up to `end` (or the line's end).
  std::vector<std::string> split_top(char end) {
    std::vector<std::string> parts;
    std::string current;
    int depth = 0;
    bool quoted = false;
    for (; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (quoted) {
        current += c;
        if (c == '\\' && pos_ + 1 < s_.size()) current += s_[++pos_];
        else if (c == '"') quoted = false;
        continue;
      }
      if (depth == 0 && c == end && end != '\0') {
        ++pos_;
        parts.push_back(trim(current));
        return parts;
      }
      if (c == '"') quoted = true;
      else if (c == '{' || c == '(' || c == '[') ++depth;
      else if (c == '}' || c == ')' || c == ']') --depth;
      if (depth < 0) fail("unbalanced brackets");
      if (depth == 0 && c == ',') {
        parts.push_back(trim(current));
        current.clear();
        continue;
      }
      current += c;
    }
    if (end != '\0') fail(fmt::format("expected '{}' (a truncated line?)", end));
    if (depth != 0 || quoted) fail("unbalanced brackets or quotes (a truncated line?)");
    if (!trim(current).empty()) parts.push_back(trim(current));
    return parts;
  }

  std::size_t pos_ = 0;

 private:
  const std::string& s_;
  const std::string& origin_;
  std::size_t line_;
};

// `calls=%f`, `to_apply=%f`, `branch_computations={%a, %b}`: the computations an attribute names.
std::vector<std::string> called_computations(const std::string& key, const std::string& value) {
  static const char* kKeys[] = {"calls", "to_apply", "condition", "body", "branch_computations", "true_computation",
                                "false_computation", "called_computations"};
  bool names_computations = false;
  for (const char* k : kKeys) names_computations = names_computations || key == k;
  if (!names_computations) return {};
  std::vector<std::string> out;
  std::string v = value;
  if (!v.empty() && v.front() == '{') v = v.substr(1, v.size() >= 2 ? v.size() - 2 : 0);
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');)
    if (!trim(item).empty()) out.push_back(strip_percent(trim(item)));
  return out;
}

void parse_instruction(const std::string& text, const std::string& origin, std::size_t number, HloComputation& c) {
  LineParser p(text, origin, number);
  HloInstruction inst;
  inst.line = number;
  if (text.compare(0, 5, "ROOT ") == 0) {
    inst.root = true;
    p.pos_ = 5;
  }
  inst.name = p.name();
  p.expect('=', fmt::format("after the instruction name {}", inst.name).c_str());
  inst.shape = p.shape();
  p.skip_spaces();
  const std::size_t op0 = p.pos_;
  while (!p.done() && is_name_char(p.peek())) ++p.pos_;
  inst.opcode = text.substr(op0, p.pos_ - op0);
  if (inst.opcode.empty()) p.fail(fmt::format("%{}: expected an opcode after the shape", inst.name));
  p.expect('(', fmt::format("after the opcode of %{}", inst.name).c_str());
  std::vector<std::string> operands = p.split_top(')');
  // A constant's and a parameter's parentheses hold a value, not operands (kept as "literal": a
  // loop's bound is one).
  if (inst.opcode == "constant" || inst.opcode == "parameter") inst.attributes["literal"] = fmt::format("{}", fmt::join(operands, ","));
  if (inst.opcode != "constant" && inst.opcode != "parameter" && inst.opcode != "iota" && inst.opcode != "rng-get-and-update-state")
    for (const std::string& operand : operands) {
      if (operand.empty()) continue;
      const auto space = operand.find_last_of(' ');
      inst.operands.push_back(strip_percent(space == std::string::npos ? operand : operand.substr(space + 1)));
    }
  if (p.consume(',')) {
    for (const std::string& attr : p.split_top('\0')) {
      const auto eq = attr.find('=');
      if (eq == std::string::npos) p.fail(fmt::format("%{}: expected key=value, got \"{}\"", inst.name, attr.substr(0, 60)));
      inst.attributes[trim(attr.substr(0, eq))] = trim(attr.substr(eq + 1));
    }
  } else {
    p.skip_spaces();
    if (!p.done()) p.fail(fmt::format("%{}: unexpected text after the operands", inst.name));
  }
  if (c.by_name.count(inst.name)) p.fail(fmt::format("a second instruction named %{} in {}", inst.name, c.name));
  for (const std::string& operand : inst.operands)
    if (!c.by_name.count(operand)) p.fail(fmt::format("%{}: operand %{} is not an instruction before it in {}", inst.name, operand, c.name));
  c.by_name[inst.name] = c.instructions.size();
  if (inst.root) c.root = c.instructions.size();
  c.instructions.push_back(std::move(inst));
}

}  // namespace

std::optional<double> hlo_dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, double> kBytes = {
      {"pred", 1}, {"s4", 0.5}, {"u4", 0.5}, {"s8", 1}, {"u8", 1}, {"s16", 2}, {"u16", 2}, {"s32", 4}, {"u32", 4}, {"s64", 8},
      {"u64", 8}, {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}, {"c64", 8}, {"c128", 16}, {"f8e4m3fn", 1}, {"f8e5m2", 1},
      {"f8e4m3b11fnuz", 1}, {"f8e4m3fnuz", 1}, {"f8e5m2fnuz", 1}, {"token", 0}};
  const auto it = kBytes.find(dtype);
  if (it == kBytes.end()) return std::nullopt;
  return it->second;
}

std::uint64_t HloShape::element_count() const {
  if (is_tuple()) {
    std::uint64_t n = 0;
    for (const auto& e : elements) n += e.element_count();
    return n;
  }
  std::uint64_t n = 1;
  for (auto d : dims) n *= static_cast<std::uint64_t>(d);
  return n;
}

std::uint64_t HloShape::bytes() const {
  if (is_tuple()) {
    std::uint64_t n = 0;
    for (const auto& e : elements) n += e.bytes();
    return n;
  }
  return static_cast<std::uint64_t>(static_cast<double>(element_count()) * hlo_dtype_bytes(dtype).value_or(0) + 0.5);
}

std::string HloShape::str() const {
  if (!is_tuple()) return fmt::format("{}[{}]", dtype, fmt::join(dims, ","));
  std::vector<std::string> parts;
  for (const auto& e : elements) parts.push_back(e.str());
  return fmt::format("({})", fmt::join(parts, ", "));
}

HloModule parse_hlo_module(const std::string& text, const std::string& origin) {
  HloModule m;
  std::istringstream in(text);
  std::string raw;
  std::size_t number = 0, instructions = 0;
  bool have_entry = false, in_computation = false, have_header = false;
  std::size_t open_line = 0;
  while (std::getline(in, raw)) {
    ++number;
    if (raw.size() > kMaxLineBytes) throw std::invalid_argument(fmt::format("{}:{}: a line longer than {} bytes", origin, number, kMaxLineBytes));
    const std::string line = trim(strip_comments(raw));
    if (line.empty() || line.compare(0, 2, "//") == 0) continue;
    if (have_header && !in_computation && is_table_line(line)) continue;
    if (!have_header && line.compare(0, 10, "HloModule ") != 0)
      throw std::invalid_argument(fmt::format("{}:{}: not an HLO module (expected its HloModule line first)", origin, number));
    if (line.compare(0, 10, "HloModule ") == 0) {
      if (have_header) throw std::invalid_argument(fmt::format("{}:{}: a second HloModule line", origin, number));
      have_header = true;
      LineParser p(line, origin, number);
      p.pos_ = 10;
      m.name = p.name();
      if (p.consume(','))
        for (const std::string& attr : p.split_top('\0')) {
          const auto eq = attr.find('=');
          if (eq != std::string::npos) m.attributes[trim(attr.substr(0, eq))] = trim(attr.substr(eq + 1));
        }
      continue;
    }
    if (line == "}") {
      if (!in_computation) throw std::invalid_argument(fmt::format("{}:{}: a '}}' outside any computation", origin, number));
      HloComputation& c = m.computations.back();
      if (c.instructions.empty()) throw std::invalid_argument(fmt::format("{}:{}: computation {} is empty", origin, number, c.name));
      if (!c.instructions[c.root].root) c.root = c.instructions.size() - 1;  // no ROOT mark: the last
      in_computation = false;
      continue;
    }
    if (line.back() == '{' && line.find(" = ") == std::string::npos) {
      if (in_computation)
        throw std::invalid_argument(fmt::format("{}:{}: a computation begins before the one at line {} ends", origin, number, open_line));
      LineParser p(line, origin, number);
      const bool entry = line.compare(0, 6, "ENTRY ") == 0;
      if (entry) p.pos_ = 6;
      HloComputation c;
      c.name = p.name();
      if (m.by_name.count(c.name)) p.fail(fmt::format("a second computation named {}", c.name));
      if (entry) {
        if (have_entry) p.fail("a second ENTRY computation");
        have_entry = true;
        m.entry = m.computations.size();
      }
      m.by_name[c.name] = m.computations.size();
      m.computations.push_back(std::move(c));
      in_computation = true;
      open_line = number;
      continue;
    }
    if (!in_computation) throw std::invalid_argument(fmt::format("{}:{}: an instruction outside any computation", origin, number));
    if (++instructions > kMaxInstructions)
      throw std::invalid_argument(fmt::format("{}:{}: more than {} instructions", origin, number, kMaxInstructions));
    parse_instruction(line, origin, number, m.computations.back());
  }
  if (!have_header) throw std::invalid_argument(fmt::format("{}: not an HLO module (no HloModule line)", origin));
  if (in_computation)
    throw std::invalid_argument(fmt::format("{}:{}: computation {} has no closing '}}' (a truncated file?)", origin, number,
                                            m.computations.back().name));
  if (!have_entry) throw std::invalid_argument(fmt::format("{}: no ENTRY computation", origin));
  for (const HloComputation& c : m.computations)
    for (const HloInstruction& inst : c.instructions)
      for (const auto& [key, value] : inst.attributes)
        for (const std::string& called : called_computations(key, value))
          if (!m.by_name.count(called))
            throw std::invalid_argument(fmt::format("{}:{}: %{}: {}={} names no computation of the module", origin, inst.line, inst.name,
                                                    key, value.substr(0, 80)));
  return m;
}

std::vector<std::int64_t> hlo_int_list(const std::string& value) {
  std::vector<std::int64_t> out;
  std::string number;
  for (char c : value) {
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
      number += c;
      continue;
    }
    if (!number.empty() && number != "-" && number.size() <= 18) out.push_back(std::stoll(number));
    number.clear();
  }
  if (!number.empty() && number != "-" && number.size() <= 18) out.push_back(std::stoll(number));
  return out;
}

std::vector<std::vector<std::int64_t>> hlo_int_lists(const std::string& value) {
  std::vector<std::vector<std::int64_t>> out;
  int depth = 0;
  std::string current;
  for (char c : value) {
    if (c == '{') {
      if (++depth == 2) current.clear();
      continue;
    }
    if (c == '}') {
      if (depth-- == 2) out.push_back(hlo_int_list(current));
      continue;
    }
    if (depth == 2) current += c;
  }
  return out;
}

}  // namespace tpusim
