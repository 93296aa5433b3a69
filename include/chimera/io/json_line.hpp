#pragma once
// One JSON object on one line, for the JSON-lines outputs (metrics, `chimera plan --format json`).
// nlohmann writes every key and value (escapes, shortest round-trip numbers, null for NaN and
// infinities); the layout keeps a space after each ':' and ',' as these lines always had, because
// scripts split them as text too (jobscripts/lib/study.sh reads "iter_ms": with awk).
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace chimera::io {

// `{"key": value, "key": value}` in the object's own key order (use nlohmann::ordered_json to
// keep the order of insertion); no newline.
std::string json_object_line(const nlohmann::ordered_json& object);

}  // namespace chimera::io
