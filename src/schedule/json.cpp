#include "chimera/schedule/json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "chimera/core/error.hpp"
#include "chimera/schedule/verify.hpp"

namespace chimera::schedule {

namespace {

using Json = nlohmann::json;

const Json& field(const Json& object, const char* key, const std::string& where) {
  CHIMERA_REQUIRE(object.is_object(), "schedule JSON: {} must be an object", where);
  const auto it = object.find(key);
  CHIMERA_REQUIRE(it != object.end(), "schedule JSON: {} has no key \"{}\"", where, key);
  return *it;
}

int integer(const Json& value, const std::string& what) {
  CHIMERA_REQUIRE(value.is_number_integer(), "schedule JSON: {} must be an integer, got {}", what,
                  value.dump());
  const auto v = value.get<std::int64_t>();
  CHIMERA_REQUIRE(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(),
                  "schedule JSON: {} = {} is out of range", what, v);
  return static_cast<int>(v);
}

std::vector<int> integers(const Json& value, const std::string& what) {
  CHIMERA_REQUIRE(value.is_array(), "schedule JSON: {} must be an array of integers", what);
  std::vector<int> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    out.push_back(integer(value[i], fmt::format("{}[{}]", what, i)));
  }
  return out;
}

OpKind kind_from(const Json& value, const std::string& what) {
  CHIMERA_REQUIRE(value.is_string(), "schedule JSON: {} must be a string", what);
  const auto s = value.get<std::string>();
  if (s == "F") return OpKind::F;
  if (s == "B") return OpKind::B;
  if (s == "I") return OpKind::I;
  if (s == "W") return OpKind::W;
  throw InputError(fmt::format("schedule JSON: {} = \"{}\": use F, B, I or W", what, s));
}

}  // namespace

namespace {

using Ordered = nlohmann::ordered_json;

Ordered op_json(const Op& op) {
  return Ordered{{"op", std::string(1, op_letter(op.kind))},
                 {"pipe", op.pipe},
                 {"stage", op.stage},
                 {"mbs", op.mbs}};
}

Ordered instr_json(const Instr& in) {
  Ordered j{{"instr", instr_name(in.kind)}};
  switch (in.kind) {
    case InstrKind::PostRecv:
    case InstrKind::WaitRecv:
    case InstrKind::Send:
      j["payload"] = in.msg.payload == Payload::Activation ? "activation" : "gradient";
      j["pipe"] = in.msg.pipe;
      j["stage"] = in.msg.stage;
      j["mb"] = in.msg.mb;
      j["from"] = in.msg.src;
      j["to"] = in.msg.dst;
      break;
    case InstrKind::Compute:
      j["op"] = in.op_index;
      break;
    case InstrKind::GradReady:
    case InstrKind::WaitGather:
      j["stage"] = in.stage;
      break;
    case InstrKind::TiedGradReady:
    case InstrKind::WaitSums:
      break;
  }
  return j;
}

// `rows` as a JSON array with one row per line, each row written by nlohmann.
template <typename Row, typename ToJson>
std::string one_per_line(const std::vector<std::vector<Row>>& rows, ToJson to_json) {
  std::string out = "[";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    Ordered row = Ordered::array();
    for (const Row& x : rows[r]) row.push_back(to_json(x));
    out += (r ? ",\n  " : "\n  ") + row.dump();
  }
  return out + "]";
}

}  // namespace

std::string schedule_to_json(const Schedule& s, const Program* program) {
  Ordered head{{"scheme", s.scheme},
               {"variant", s.variant},
               {"stages", s.stages},
               {"micro_batches", s.schedule_micro_batches}};
  if (s.mb_split != 1) head["mb_split"] = s.mb_split;
  if (s.forward_only) head["forward_only"] = true;
  head["pipes"] = s.pipes();
  std::string out = head.dump();
  out.pop_back();  // the closing brace: more keys follow
  out += fmt::format(",\n \"placement\":{},\"pipe_of\":{},\n \"workers\":",
                     Ordered(s.placement).dump(), Ordered(s.pipe_of).dump());
  out += one_per_line(s.ops, op_json);
  if (program != nullptr) {
    const ProgramFacts facts = verify_program(s, *program);
    out += fmt::format(",\n \"sums_in_one_order\":{},\n \"program\":",
                       facts.sums_in_one_order ? "true" : "false");
    out += one_per_line(program->workers, instr_json);
  }
  return out + "}\n";
}

Schedule schedule_from_json(std::string_view text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw InputError(fmt::format("schedule JSON: {}", e.what()));
  }
  const std::string top = "the top level";
  Schedule s;
  const Json& scheme = field(root, "scheme", top);
  const Json& variant = field(root, "variant", top);
  CHIMERA_REQUIRE(scheme.is_string() && variant.is_string(),
                  "schedule JSON: \"scheme\" and \"variant\" must be strings");
  s.scheme = scheme.get<std::string>();
  s.variant = variant.get<std::string>();
  s.stages = integer(field(root, "stages", top), "stages");
  s.schedule_micro_batches = integer(field(root, "micro_batches", top), "micro_batches");
  s.mb_split = root.contains("mb_split") ? integer(root["mb_split"], "mb_split") : 1;
  if (root.contains("forward_only")) {
    CHIMERA_REQUIRE(root["forward_only"].is_boolean(),
                    "schedule JSON: \"forward_only\" must be true or false");
    s.forward_only = root["forward_only"].get<bool>();
  }
  const int pipes = integer(field(root, "pipes", top), "pipes");

  const Json& placement = field(root, "placement", top);
  CHIMERA_REQUIRE(placement.is_array(), "schedule JSON: \"placement\" must be an array of arrays");
  for (std::size_t p = 0; p < placement.size(); ++p) {
    s.placement.push_back(integers(placement[p], fmt::format("placement[{}]", p)));
  }
  CHIMERA_REQUIRE(s.pipes() == pipes, "schedule JSON: \"pipes\" = {} but placement lists {} pipes",
                  pipes, s.pipes());
  s.pipe_of = integers(field(root, "pipe_of", top), "pipe_of");

  const Json& workers = field(root, "workers", top);
  CHIMERA_REQUIRE(workers.is_array(), "schedule JSON: \"workers\" must be an array of op lists");
  s.workers = static_cast<int>(workers.size());
  s.ops.resize(workers.size());
  for (std::size_t w = 0; w < workers.size(); ++w) {
    CHIMERA_REQUIRE(workers[w].is_array(), "schedule JSON: workers[{}] must be an array of ops", w);
    for (std::size_t k = 0; k < workers[w].size(); ++k) {
      const std::string at = fmt::format("workers[{}][{}]", w, k);
      const Json& op = workers[w][k];
      s.ops[w].push_back(Op{kind_from(field(op, "op", at), at + ".op"),
                            integer(field(op, "pipe", at), at + ".pipe"),
                            integer(field(op, "stage", at), at + ".stage"),
                            integers(field(op, "mbs", at), at + ".mbs")});
    }
  }
  return s;
}

}  // namespace chimera::schedule
