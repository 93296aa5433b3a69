#include "chimera/plan/layer_costs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <toml.hpp>

#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"

namespace chimera::plan {

namespace {

const toml::value& table_of(const toml::value& root, const std::string& section,
                            std::string_view origin) {
  CHIMERA_REQUIRE(root.contains(section) && root.at(section).is_table(),
                  "{}: missing table [{}]; a costs file has [model], [scaling], [embedding], "
                  "[block] and [head] (docs/scaling.md)",
                  origin, section);
  return root.at(section);
}

void reject_unknown(const toml::value& table, std::string_view where,
                    const std::vector<std::string>& known, std::string_view origin) {
  for (const auto& [key, value] : table.as_table()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const std::string near = closest_match(key, known);
    CHIMERA_REQUIRE(false, "{}: unknown key '{}{}'{}", origin, where, key,
                    near.empty() ? fmt::format("; known: {}", fmt::join(known, ", "))
                                 : fmt::format("; did you mean '{}'?", near));
  }
}

double number(const toml::value& table, const std::string& section, const std::string& key,
              std::string_view origin, bool required = true) {
  if (!table.contains(key)) {
    CHIMERA_REQUIRE(!required, "{}: missing key '{}.{}'", origin, section, key);
    return 0.0;
  }
  const toml::value& v = table.at(key);
  double x = 0.0;
  if (v.is_floating()) {
    x = v.as_floating();
  } else if (v.is_integer()) {
    x = static_cast<double>(v.as_integer());
  } else {
    CHIMERA_REQUIRE(false, "{}: '{}.{}' must be a number", origin, section, key);
  }
  CHIMERA_REQUIRE(std::isfinite(x) && x >= 0, "{}: '{}.{}' is {}; it must be finite and >= 0",
                  origin, section, key, x);
  return x;
}

int positive_int(const toml::value& table, const std::string& section, const std::string& key,
                 std::string_view origin) {
  CHIMERA_REQUIRE(table.contains(key), "{}: missing key '{}.{}'", origin, section, key);
  const toml::value& v = table.at(key);
  CHIMERA_REQUIRE(v.is_integer() && v.as_integer() >= 1 && v.as_integer() <= (1 << 30),
                  "{}: '{}.{}' must be a positive integer", origin, section, key);
  return static_cast<int>(v.as_integer());
}

OpCost op_cost(const toml::value& root, const std::string& section, std::string_view origin) {
  const toml::value& t = table_of(root, section, origin);
  reject_unknown(t, section + ".", {"forward_ms", "backward_ms"}, origin);
  return {number(t, section, "forward_ms", origin), number(t, section, "backward_ms", origin)};
}

}  // namespace

OpCost LayerCosts::scaled(const OpCost& reference, double samples) const {
  const double ratio = samples / micro_batch_size;
  auto scale = [&](double t) {
    const double fixed = std::min(overhead_ms, t);
    return fixed + (t - fixed) * ratio;
  };
  return {scale(reference.forward_ms), scale(reference.backward_ms)};
}

LayerCosts parse_layer_costs(std::string_view toml_text, std::string_view origin) {
  toml::value root;
  try {
    std::istringstream is{std::string(toml_text)};
    root = toml::parse(is, std::string(origin));
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    throw InputError(fmt::format("{}: invalid TOML: {}", origin, msg.substr(0, msg.find('\n'))));
  }
  reject_unknown(root, "", {"machine", "model", "scaling", "embedding", "block", "head"}, origin);

  LayerCosts c;
  if (root.contains("machine")) {
    CHIMERA_REQUIRE(root.at("machine").is_string(), "{}: 'machine' must be a string", origin);
    c.machine = root.at("machine").as_string().str;
  }
  const toml::value& model = table_of(root, "model", origin);
  reject_unknown(model, "model.", {"n_embd", "n_head", "seq_len", "vocab_size"}, origin);
  c.n_embd = positive_int(model, "model", "n_embd", origin);
  c.n_head = positive_int(model, "model", "n_head", origin);
  c.seq_len = positive_int(model, "model", "seq_len", origin);
  c.vocab_size = positive_int(model, "model", "vocab_size", origin);

  const toml::value& scaling = table_of(root, "scaling", origin);
  reject_unknown(scaling, "scaling.",
                 {"micro_batch_size", "overhead_ms", "stage_overhead_ms", "optimizer_ns_per_param"},
                 origin);
  c.micro_batch_size = positive_int(scaling, "scaling", "micro_batch_size", origin);
  c.overhead_ms = number(scaling, "scaling", "overhead_ms", origin, false);
  c.stage_overhead_ms = number(scaling, "scaling", "stage_overhead_ms", origin, false);
  c.optimizer_ns_per_param = number(scaling, "scaling", "optimizer_ns_per_param", origin, false);

  c.embedding = op_cost(root, "embedding", origin);
  c.block = op_cost(root, "block", origin);
  c.head = op_cost(root, "head", origin);
  CHIMERA_REQUIRE(c.block.forward_ms > 0 && c.block.backward_ms > 0,
                  "{}: a transformer block cannot take 0 ms; measure it with `chimera bench model`",
                  origin);
  return c;
}

LayerCosts load_layer_costs(const std::string& path) {
  std::ifstream in(path);
  CHIMERA_REQUIRE(in.good(), "cannot open costs file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_layer_costs(ss.str(), path);
}

}  // namespace chimera::plan
