#include "chimera/io/describe.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include "chimera/core/files.hpp"

#include "chimera/core/config.hpp"
#include "chimera/core/error.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/init_weights.hpp"

namespace chimera::io {

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CHIMERA_REQUIRE(in.good(), "{}: cannot be read", path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
}

std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

}  // namespace

FileKind detect_file_kind(const std::string& path) {
  require_not_a_directory(path, "a dataset, checkpoint, schedule JSON or trace");
  std::ifstream probe(path, std::ios::binary);
  CHIMERA_REQUIRE(probe.good(),
                  "{}: no such file (expected a dataset, checkpoint, schedule JSON "
                  "or trace)",
                  path);
  char first = '\0';
  probe >> first;
  if (first == '{' || first == '[') {
    const nlohmann::json j = read_json(path);
    if (j.is_object() && j.contains("traceEvents")) return FileKind::TraceJson;
    if (j.is_array()) return FileKind::TraceJson;  // Chrome's bare-array trace form
    if (j.is_object() && j.contains("scheme") && j.contains("workers"))
      return FileKind::ScheduleJson;
    throw InputError(
        fmt::format("{}: JSON, but neither a schedule (keys scheme, workers) nor a "
                    "Chrome trace (key traceEvents)",
                    path));
  }
  h5::Handle file = h5::open_file_read(path, "dataset, checkpoint, schedule JSON or trace");
  // A file with a dataset's attributes but no /tokens is a broken dataset: the dataset reader
  // says what is missing, as `train` would.
  const bool dataset_like =
      h5::has_link(file.get(), "tokens") || h5::has_attribute(file.get(), "vocab_size") ||
      h5::has_attribute(file.get(), "eos_token") || h5::has_attribute(file.get(), "tokenizer");
  return dataset_like ? FileKind::TokenDataset : FileKind::Checkpoint;
}

std::string describe_checkpoint(const std::string& path, const CheckpointDescribeOptions& options) {
  const CheckpointReader reader(path);
  std::ostringstream out;
  if (reader.is_chimera_checkpoint()) {
    const CheckpointMeta meta = reader.meta();
    out << fmt::format("{}: Chimera checkpoint\n  step {}, seed {}, data cursor {} samples\n", path,
                       meta.step, meta.seed, meta.data_cursor);
    try {
      const Config config = Config::from_toml(meta.config, path + ":config");
      const auto& m = config.model;
      const auto& p = config.parallel;
      out << fmt::format("  model: n_layer={} n_embd={} n_head={} n_ctx={} vocab_size={}\n",
                         m.n_layer, m.n_embd, m.n_head, m.n_ctx, m.vocab_size);
      out << fmt::format("  saved by: scheme={} D={} N={} B={} (any partition can load it)\n",
                         p.scheme, p.stages, p.micro_batches, p.micro_batch_size);
    } catch (const InputError& e) {
      out << "  config: not a valid Chimera config (" << e.what() << ")\n";
    }
    if (options.show_config)
      out << "  config:\n" << meta.config << (meta.config.ends_with('\n') ? "" : "\n");
  } else {
    out << fmt::format("{}: HDF5 tensors without Chimera's checkpoint attributes\n", path);
  }
  // The table first: reading the values (for the norms) may find a tensor that no run can load.
  const auto entries = reader.entries();
  std::size_t width = 6;
  for (const auto& e : entries) width = std::max(width, e.spec.name.size());
  std::ostringstream table;
  table << fmt::format("  {:<{}}  {:<16} {:<8} {:>12}\n", "tensor", width, "shape", "dtype",
                       options.norms ? "L2 norm" : "");
  std::int64_t weights = 0, optimizer = 0;
  std::optional<std::string> unreadable_values;
  for (const auto& e : entries) {
    std::string norm;
    if (e.problem) {
      norm = "unreadable";
      if (!unreadable_values) unreadable_values = e.problem;
    } else if (options.norms && is_readable_float(e.dtype)) {
      std::vector<float> v(static_cast<std::size_t>(e.spec.numel()));
      try {
        reader.read(e.spec.name, v);
        double sum = 0;
        for (const float x : v) sum += static_cast<double>(x) * x;
        norm = fmt::format("{:.6g}", std::sqrt(sum));
      } catch (const InputError& error) {
        norm = "unreadable";
        if (!unreadable_values) unreadable_values = error.what();
      }
    }
    table << fmt::format("  {:<{}}  {:<16} {:<8} {:>12}\n", e.spec.name, width,
                         h5::format_shape(e.spec.shape), e.dtype, norm);
    (is_optimizer_state(e.spec.name) ? optimizer : weights) += e.spec.numel();
  }

  if (options.guess_model) {
    try {
      const ModelGuess guess = options.guess_model(reader);
      const InitWeights init = match_init_weights(reader, guess.weights);
      if (unreadable_values) throw InputError(*unreadable_values);
      out << fmt::format("  usable with --init for a model with {}{}{}\n", guess.description,
                         init.conversions.empty() ? "" : " (" + init.conversions + ")",
                         options.norms ? "" : " (values not read: --no-norms)");
    } catch (const InputError& e) {
      out << fmt::format("  not usable with --init: {}\n", e.what());
    }
  }
  out << table.str();
  out << fmt::format("  {} tensors: {} parameters, {} optimizer values\n", entries.size(),
                     with_thousands(weights), with_thousands(optimizer));
  return out.str();
}

std::string describe_schedule_json(const std::string& path) {
  const nlohmann::json j = read_json(path);
  std::ostringstream out;
  try {
    out << fmt::format(
        "{}: pipeline schedule (JSON)\n  scheme {}{}, D={} stages, N={} "
        "micro-batches, {} pipes\n",
        path, j.at("scheme").get<std::string>(),
        j.contains("variant") ? " (" + j["variant"].get<std::string>() + ")" : "",
        j.value("stages", 0), j.value("micro_batches", 0), j.value("pipes", 0));
    if (j.contains("placement"))
      out << "  placement (pipe -> workers of its stages): " << j["placement"].dump() << "\n";
    const auto& workers = j.at("workers");
    for (std::size_t w = 0; w < workers.size(); ++w) {
      std::map<std::string, int> ops;
      for (const auto& op : workers[w]) ++ops[op.at("op").get<std::string>()];
      std::string counts;
      for (const auto& [kind, n] : ops) counts += fmt::format(" {}={}", kind, n);
      out << fmt::format("  worker {}: {} ops:{}\n", w, workers[w].size(), counts);
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not a valid schedule JSON ({})", path, e.what()));
  }
  out << "  (render it with `chimera schedule`; the format is DESIGN §3)\n";
  return out.str();
}

std::string describe_trace_json(const std::string& path) {
  const nlohmann::json j = read_json(path);
  const nlohmann::json& events = j.is_array() ? j : j.at("traceEvents");
  static const char* kLanes[] = {"compute", "p2p", "allreduce"};
  std::map<std::int64_t, std::array<double, 3>> busy_us;  // rank -> lane -> µs
  double begin = 1e300, end = -1e300;
  std::int64_t complete = 0;
  try {
    for (const auto& e : events) {
      if (e.value("ph", "") != "X") continue;
      ++complete;
      const double ts = e.at("ts").get<double>(), dur = e.value("dur", 0.0);
      begin = std::min(begin, ts);
      end = std::max(end, ts + dur);
      const auto tid = e.value("tid", std::int64_t{0});
      auto& lanes = busy_us[e.value("pid", std::int64_t{0})];
      if (tid >= 0 && tid < 3) lanes[static_cast<std::size_t>(tid)] += dur;
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not a valid Chrome trace ({})", path, e.what()));
  }
  std::ostringstream out;
  out << fmt::format("{}: Chrome trace, {} events ({} complete 'X' events) on {} ranks\n", path,
                     events.size(), complete, busy_us.size());
  if (complete == 0) return out.str();
  const double span = end - begin;
  out << fmt::format("  span {:.3f} ms; busy time per rank (ms, % of span):\n", span / 1e3);
  for (const auto& [rank, lanes] : busy_us) {
    out << fmt::format("  rank {:>4}:", rank);
    for (std::size_t lane = 0; lane < 3; ++lane)
      out << fmt::format("  {} {:.3f} ({:.0f}%)", kLanes[lane], lanes[lane] / 1e3,
                         span > 0 ? 100 * lanes[lane] / span : 0.0);
    out << "\n";
  }
  out << "  (open it in Perfetto, ui.perfetto.dev, or plot it with analysis/)\n";
  return out.str();
}

}  // namespace chimera::io
