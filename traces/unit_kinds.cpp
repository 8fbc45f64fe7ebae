// The table of unit kinds: tpusim's own rows (traces/event_sink.hpp), then a program's.
#include <cstring>
#include <deque>
#include <stdexcept>

#include <fmt/format.h>

#include "traces/event_sink.hpp"

namespace tpusim {
namespace {

std::vector<UnitKindTraits>& kinds() {
  static std::vector<UnitKindTraits> table(std::begin(kBuiltInUnitKinds), std::end(kBuiltInUnitKinds));
  return table;
}

// Two rows naming the same thing (both null: nothing).
bool same(const char* a, const char* b) { return a && b && std::strcmp(a, b) == 0; }

}  // namespace

const std::vector<UnitKindTraits>& unit_kinds() { return kinds(); }

UnitKind register_unit_kind(const UnitKindTraits& traits) {
  static std::deque<std::string> strings;  // what the registered rows point at, as long as the program runs
  if (!traits.name || !*traits.name) throw std::invalid_argument("a unit kind needs a name");
  if (kinds().size() >= kMaxUnitKinds)
    throw std::invalid_argument(fmt::format("unit kind \"{}\": at most {} kinds of unit", traits.name, kMaxUnitKinds));
  for (const UnitKindTraits& kind : kinds()) {
    if (same(kind.name, traits.name)) throw std::invalid_argument(fmt::format("a unit kind named \"{}\" exists already", traits.name));
    for (const char* key : {traits.utilization, traits.traffic})
      if (same(kind.utilization, key) || same(kind.traffic, key))
        throw std::invalid_argument(fmt::format("unit kind \"{}\": the summary key \"{}\" is kind \"{}\"'s", traits.name, key, kind.name));
    if (same(kind.counter, traits.counter) && *traits.counter)
      throw std::invalid_argument(fmt::format("unit kind \"{}\": the trace counter \"{}\" is kind \"{}\"'s", traits.name, traits.counter, kind.name));
  }
  const auto keep = [&](const char* text) -> const char* { return text ? strings.emplace_back(text).c_str() : nullptr; };
  UnitKindTraits row = traits;
  row.kind = static_cast<UnitKind>(kinds().size());
  row.name = keep(traits.name);
  row.utilization = keep(traits.utilization);
  row.traffic = keep(traits.traffic);
  row.counter = keep(traits.counter);
  kinds().push_back(row);
  return row.kind;
}

}  // namespace tpusim
