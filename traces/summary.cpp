#include "traces/summary.hpp"

#include <type_traits>

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsNamedValues : std::false_type {};
template <typename T>
struct IsNamedValues<NamedValues<T>> : std::true_type {};

template <typename T, typename = void>
struct HasFields : std::false_type {};
template <typename T>
struct HasFields<T, std::void_t<decltype(std::declval<T&>().template fields<int>(std::declval<int&>()))>> : std::true_type {};

// Builds the JSON object of a block, its keys in the order `fields` lists them.
class Writer {
 public:
  explicit Writer(ojson& out) : out_(out) { out_ = ojson::object(); }

  template <typename T>
  void field(const char* name, const T& value) {
    out_[name] = json_of(value);
  }
  template <typename T>
  void nullable(const char* name, const std::optional<T>& value) {
    out_[name] = value ? json_of(*value) : ojson(nullptr);
  }
  template <typename T>
  void optional(const char* name, const std::optional<T>& value) {
    if (value) out_[name] = json_of(*value);
  }
  template <typename T>
  void unless_empty(const char* name, const std::vector<T>& values) {
    if (!values.empty()) field(name, values);
  }
  void choice(const char* name, const bool& first, const char* if_true, const char* if_false) {
    out_[name] = first ? if_true : if_false;
  }

  template <typename T>
  static ojson json_of(const T& value) {
    if constexpr (HasFields<T>::value) {
      ojson j;
      Writer w(j);
      const_cast<T&>(value).fields(w);  // `fields` only reads through a Writer
      return j;
    } else if constexpr (std::is_same_v<T, ojson>) {
      return value;
    } else if constexpr (IsOptional<T>::value) {
      return value ? json_of(*value) : ojson(nullptr);
    } else if constexpr (IsNamedValues<T>::value) {
      ojson o = ojson::object();
      for (const auto& [name, v] : value) o[name] = json_of(v);
      return o;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      return value;
    } else if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {  // a vector of blocks
      ojson a = ojson::array();
      for (const auto& item : value) a.push_back(json_of(item));
      return a;
    } else {
      return ojson(value);
    }
  }

 private:
  ojson& out_;
};

// Fills a block from a JSON object; what is missing or of another type keeps its default.
class Reader {
 public:
  // `unread`: where to note the always-written fields that are missing or of another type.
  explicit Reader(const ojson& in, std::vector<std::string>* unread = nullptr) : in_(in), unread_(unread) {}

  template <typename T>
  void field(const char* name, T& value) {
    const ojson* j = find(name);
    if (!(j && read(*j, value)) && unread_) unread_->push_back(name);
  }
  template <typename T>
  void nullable(const char* name, std::optional<T>& value) {
    optional(name, value);
  }
  template <typename T>
  void optional(const char* name, std::optional<T>& value) {
    value.reset();
    const ojson* j = find(name);
    if (!j || j->is_null()) return;
    T v{};
    if (read(*j, v)) value = std::move(v);
  }
  template <typename T>
  void unless_empty(const char* name, std::vector<T>& values) {
    field(name, values);
  }
  void choice(const char* name, bool& first, const char* if_true, const char*) {
    if (const ojson* j = find(name); j && j->is_string()) first = j->get<std::string>() == if_true;
  }

 private:
  const ojson* find(const char* name) const {
    if (!in_.is_object()) return nullptr;
    const auto it = in_.find(name);
    return it == in_.end() ? nullptr : &*it;
  }

  template <typename T>
  static bool read(const ojson& j, T& value) {
    if constexpr (HasFields<T>::value) {
      if (!j.is_object()) return false;
      Reader r(j);
      value.fields(r);
      return true;
    } else if constexpr (std::is_same_v<T, ojson>) {
      value = j;
      return true;
    } else if constexpr (IsOptional<T>::value) {
      value.reset();
      if (j.is_null()) return true;
      typename T::value_type v{};
      if (!read(j, v)) return false;
      value = std::move(v);
      return true;
    } else if constexpr (IsNamedValues<T>::value) {
      if (!j.is_object()) return false;
      value.clear();
      for (const auto& [name, item] : j.items()) {
        typename T::value_type::second_type v{};
        if (read(item, v)) value.emplace_back(name, std::move(v));
      }
      return true;
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!j.is_string()) return false;
      value = j.get<std::string>();
      return true;
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!j.is_boolean()) return false;
      value = j.get<bool>();
      return true;
    } else if constexpr (std::is_arithmetic_v<T>) {
      if (!j.is_number() || (std::is_integral_v<T> && !(j.is_number_unsigned() || j.is_number_integer()))) return false;
      value = j.get<T>();
      return true;
    } else {  // a vector
      if (!j.is_array()) return false;
      value.clear();
      for (const ojson& item : j) {
        typename T::value_type v{};
        if (read(item, v)) value.push_back(std::move(v));
      }
      return true;
    }
  }

  const ojson& in_;
  std::vector<std::string>* unread_;
};

}  // namespace

ojson to_json(const RunSummary& summary) { return Writer::json_of(summary); }
ojson to_json(const SimulationSummary& simulation) { return Writer::json_of(simulation); }
ojson to_json(const SweepRow& row) { return Writer::json_of(row); }

std::optional<RunSummary> SweepRow::run_summary() const {
  if (!summary.is_object()) return std::nullopt;
  return run_summary_from_json(summary);
}
ojson to_json(const SweepDocument& sweep) { return Writer::json_of(sweep); }

SweepDocument sweep_document_from_json(const ojson& json, std::vector<std::string>* unread) {
  SweepDocument sweep;
  Reader r(json, unread);
  sweep.fields(r);
  return sweep;
}

SweepRow sweep_row_from_json(const ojson& json, std::vector<std::string>* unread) {
  SweepRow row;
  Reader r(json, unread);
  row.fields(r);
  return row;
}

RunSummary run_summary_from_json(const ojson& json) {
  RunSummary s;
  s.status.clear();
  Reader r(json);
  s.fields(r);
  return s;
}

}  // namespace tpusim
