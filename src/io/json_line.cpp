#include "chimera/io/json_line.hpp"

#include <nlohmann/json.hpp>

namespace chimera::io {

std::string json_object_line(const nlohmann::ordered_json& object) {
  std::string line = "{";
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it != object.begin()) line += ", ";
    line += nlohmann::json(it.key()).dump();
    line += ": ";
    line += it.value().dump();
  }
  line += "}";
  return line;
}

}  // namespace chimera::io
