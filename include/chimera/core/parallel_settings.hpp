#pragma once
// The pipeline schemes and the [parallel] settings that belong to some of them only: one list of
// names (help texts and errors print it) and one table of settings (the schemes each applies to,
// its range, its message). `chimera train`, `schedule` and `plan` all check requests against the
// table, so a setting given to a scheme it does not apply to is refused, never ignored.
#include <string>
#include <string_view>
#include <vector>

namespace chimera {

// The generated schemes, in the order tables list them (file:PATH runs a schedule file besides).
const std::vector<std::string>& scheme_names();
// scheme_names() joined by ", ", for help texts and errors.
std::string scheme_list();

// A scheme and its scheme-specific settings as given (0 or "" = not given).
struct SchemeSettings {
  std::string_view scheme;
  std::string_view variant;
  int pipes = 0;
  int virtual_stages = 0;
  int max_in_flight = 0;
};

struct SchemeSetting {
  std::string_view key;                   // under [parallel]; `chimera schedule --KEY`
  std::vector<std::string_view> schemes;  // the schemes it applies to
  std::string_view range;                 // its values, as a refusal names them
  // The value as given, as text; empty where it is left at a value every scheme accepts.
  std::string (*given)(const SchemeSettings&);
  bool (*in_range)(const SchemeSettings&);
};

// The table, one row per setting.
const std::vector<SchemeSetting>& scheme_settings();

// An InputError (status 2, one line naming the key and the schemes it applies to) for a setting
// given to a scheme it does not apply to, or a value out of its range.
void check_scheme_settings(const SchemeSettings& settings);

}  // namespace chimera
