#include "chimera/core/config.hpp"
#include "chimera/core/files.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <toml.hpp>
#include <variant>

#include "chimera/core/error.hpp"
#include "chimera/core/parallel_settings.hpp"

namespace chimera {

namespace {

// --- the words of enum keys -------------------------------------------------------------

template <typename E>
struct Word {
  E value;
  std::string_view text;
};

// For each enum: the key it is the value of, its words (the TOML and --set spelling), and the
// message part that lists them for a word that is none of them.
template <typename E>
struct EnumWords;

template <>
struct EnumWords<ComputeMode> {
  static constexpr std::string_view key = "runtime.compute";
  static constexpr std::string_view expected = "expected 'real' or 'emulate'";
  static constexpr std::array words{Word<ComputeMode>{ComputeMode::Real, "real"},
                                    Word<ComputeMode>{ComputeMode::Emulate, "emulate"}};
};
template <>
struct EnumWords<WaitMode> {
  static constexpr std::string_view key = "runtime.wait";
  static constexpr std::string_view expected = "expected 'doorbell' or 'poll'";
  static constexpr std::array words{Word<WaitMode>{WaitMode::Doorbell, "doorbell"},
                                    Word<WaitMode>{WaitMode::Poll, "poll"}};
};
template <>
struct EnumWords<BackendKind> {
  static constexpr std::string_view key = "runtime.backend";
  static constexpr std::string_view expected = "expected 'cpu' or 'cuda'";
  static constexpr std::array words{Word<BackendKind>{BackendKind::Cpu, "cpu"},
                                    Word<BackendKind>{BackendKind::Cuda, "cuda"}};
};
template <>
struct EnumWords<MessagesMode> {
  static constexpr std::string_view key = "runtime.messages";
  static constexpr std::string_view expected = "expected auto, device or host";
  static constexpr std::array words{Word<MessagesMode>{MessagesMode::Auto, "auto"},
                                    Word<MessagesMode>{MessagesMode::Device, "device"},
                                    Word<MessagesMode>{MessagesMode::Host, "host"}};
};
template <>
struct EnumWords<AllreduceMode> {
  static constexpr std::string_view key = "runtime.allreduce";
  static constexpr std::string_view expected = "expected auto, nccl or mpi";
  static constexpr std::array words{Word<AllreduceMode>{AllreduceMode::Auto, "auto"},
                                    Word<AllreduceMode>{AllreduceMode::Nccl, "nccl"},
                                    Word<AllreduceMode>{AllreduceMode::Mpi, "mpi"}};
};
template <>
struct EnumWords<NonfinitePolicy> {
  static constexpr std::string_view key = "train.on_nonfinite";
  static constexpr std::string_view expected = "use stop or skip";
  static constexpr std::array words{Word<NonfinitePolicy>{NonfinitePolicy::Stop, "stop"},
                                    Word<NonfinitePolicy>{NonfinitePolicy::Skip, "skip"}};
};
template <>
struct EnumWords<SaveErrorPolicy> {
  static constexpr std::string_view key = "checkpoint.on_save_error";
  static constexpr std::string_view expected = "use stop or warn";
  static constexpr std::array words{Word<SaveErrorPolicy>{SaveErrorPolicy::Stop, "stop"},
                                    Word<SaveErrorPolicy>{SaveErrorPolicy::Warn, "warn"}};
};

template <typename E>
std::string_view word_of(E value) {
  for (const auto& w : EnumWords<E>::words) {
    if (w.value == value) return w.text;
  }
  return "?";
}

using FieldRef = std::variant<int*, std::int64_t*, double*, bool*, std::string*, std::vector<int>*,
                              std::vector<std::string>*, ComputeMode*, WaitMode*, BackendKind*,
                              MessagesMode*, AllreduceMode*, NonfinitePolicy*, SaveErrorPolicy*>;

struct Field {
  std::string_view section;
  std::string_view key;
  FieldRef ref;
  std::string_view help;
};

std::string_view scheme_help() {
  static const std::string help = fmt::format(
      "pipeline scheme: {}, or file:PATH (a schedule JSON, or PyTorch's compute-only CSV for a "
      ".csv name)",
      scheme_list());
  return help;
}

// The single table of every configuration key. Order is the order of to_toml().
std::vector<Field> fields(Config& c) {
  return {
      {"model", "n_layer", &c.model.n_layer, "transformer blocks L"},
      {"model", "n_embd", &c.model.n_embd, "embedding width C"},
      {"model", "n_head", &c.model.n_head, "attention heads H (must divide n_embd)"},
      {"model", "n_ctx", &c.model.n_ctx, "maximum sequence length (position embeddings)"},
      {"model", "vocab_size", &c.model.vocab_size, "vocabulary size V (GPT-2: 50257)"},
      {"parallel", "scheme", &c.parallel.scheme, scheme_help()},
      {"parallel", "stages", &c.parallel.stages, "D: pipeline stages (workers per pipeline group)"},
      {"parallel", "micro_batches", &c.parallel.micro_batches,
       "N: micro-batches per pipeline group and iteration"},
      {"parallel", "micro_batch_size", &c.parallel.micro_batch_size, "B: samples per micro-batch"},
      {"parallel", "variant", &c.parallel.variant, "chimera for N > D: direct, doubling, halving"},
      {"parallel", "pipes", &c.parallel.pipes, "chimera: pipelines 2f (0 = scheme default)"},
      {"parallel", "virtual", &c.parallel.virtual_stages,
       "interleaved: model stages per worker (0 = 2)"},
      {"parallel", "max_in_flight", &c.parallel.max_in_flight,
       "chimera-zb: the most chunk-activations (a micro-batch through 1/(2D) of the model) a "
       "worker holds at once (0 = 2D); at least Chimera's own peak, 2D"},
      {"parallel", "recompute", &c.parallel.recompute, "recompute activations in the backward"},
      {"parallel", "shard_optimizer", &c.parallel.shard_optimizer,
       "split each stage's AdamW moments over the ranks holding it: reduce-scatter the gradient, "
       "update a shard, all-gather the weights (a stage with one holder keeps its whole "
       "moments either way; false: every holder keeps and updates whole moments)"},
      {"parallel", "partition", &c.parallel.partition,
       "explicit blocks per model stage, e.g. [3,3,2,2] (empty = balanced)"},
      {"data", "train", &c.data.train, "training token shards (HDF5)"},
      {"data", "val", &c.data.val, "validation token shards (HDF5)"},
      {"data", "seq_len", &c.data.seq_len, "T: tokens per sample (<= model.n_ctx)"},
      {"data", "prefetch", &c.data.prefetch,
       "read the next step's samples on a helper thread while this step computes (false: each "
       "step reads its own first)"},
      {"train", "steps", &c.train.steps, "optimizer steps to run"},
      {"train", "lr", &c.train.lr, "peak learning rate"},
      {"train", "min_lr", &c.train.min_lr, "learning rate at the end of the cosine decay"},
      {"train", "warmup_steps", &c.train.warmup_steps, "linear warmup steps"},
      {"train", "weight_decay", &c.train.weight_decay,
       "AdamW decoupled weight decay (2-D weights)"},
      {"train", "beta1", &c.train.beta1, "AdamW beta1"},
      {"train", "beta2", &c.train.beta2, "AdamW beta2"},
      {"train", "eps", &c.train.eps, "AdamW epsilon"},
      {"train", "grad_clip", &c.train.grad_clip, "global gradient-norm clip (0 = off, >= 0)"},
      {"train", "seed", &c.train.seed, "seed for initialisation and data shuffling"},
      {"train", "eval_every", &c.train.eval_every, "validation loss every K steps (0 = never)"},
      {"train", "eval_batches", &c.train.eval_batches,
       "global batches per validation (>= 1 while eval_every > 0)"},
      {"train", "on_nonfinite", &c.train.on_nonfinite,
       "a NaN/Inf loss or gradient norm: stop (status 3, no checkpoint of it) or skip the update"},
      {"train", "max_skipped_steps", &c.train.max_skipped_steps,
       "skip: stop with status 3 after this many consecutive skipped steps"},
      {"checkpoint", "dir", &c.checkpoint.dir, "checkpoint directory (empty = none)"},
      {"checkpoint", "every", &c.checkpoint.every, "save every K steps (0 = at the end)"},
      {"checkpoint", "keep", &c.checkpoint.keep, "checkpoints to keep"},
      {"checkpoint", "on_save_error", &c.checkpoint.on_save_error,
       "a failed save (disk full, I/O error): stop (status 1) or warn and retry at the next save"},
      {"checkpoint", "save_timeout_s", &c.checkpoint.save_timeout_s,
       "a save not finished after this many seconds ends the job, status 1 (0 = no bound)"},
      {"checkpoint", "async", &c.checkpoint.async,
       "write checkpoints in the background while training goes on (false: every rank waits)"},
      {"log", "every", &c.log.every, "print a step line every K steps"},
      {"log", "metrics", &c.log.metrics, "JSON-lines metrics file (empty = none)"},
      {"log", "trace", &c.log.trace, "Chrome trace file (empty = none)"},
      {"log", "sample_tokens", &c.log.sample_tokens,
       "tokens of a text sample printed with each validation loss (0 = none)"},
      {"log", "sample_prompt", &c.log.sample_prompt,
       "prompt of those samples: text for GPT-2's vocabulary, else token ids \"1 2 3\" (empty = "
       "the end-of-text token, or token 0)"},
      {"log", "tokenizer", &c.log.tokenizer,
       "GPT-2 tokenizer directory for sample prompts and text (GPT-2's vocabulary only)"},
      {"runtime", "backend", &c.runtime.backend, "compute backend: cpu, cuda"},
      {"runtime", "precision", &c.runtime.precision,
       "GEMM arithmetic: fp32; bf16 (bf16 operands, fp32 sums; cpu: AMX or AVX-512-BF16, on "
       "oneDNN or the fp32 units, whichever is faster, cuda: Ampere+ tensor cores); auto (bf16 "
       "where the device has it, else fp32); "
       "bf16-emulated (cpu, bf16 numerics on fp32 units, for tests); tf32 (cuda)"},
      {"runtime", "messages", &c.runtime.messages,
       "cuda: activations cross ranks as auto, device (CUDA-aware MPI) or host (staged)"},
      {"runtime", "allreduce", &c.runtime.allreduce,
       "cuda: gradients are summed with auto, nccl or mpi"},
      {"runtime", "device_mpi_with_nccl", &c.runtime.device_mpi_with_nccl,
       "cuda: allow device-buffer MPI messages and NCCL sums at the same time, which NCCL's "
       "documentation says may deadlock (false: auto never combines them, asking for both is an "
       "error)"},
      {"runtime", "compute", &c.runtime.compute, "real, or emulate (timed waits of --cost)"},
      {"runtime", "cost", &c.runtime.cost, "emulate: F:B[:W] milliseconds per stage op"},
      {"runtime", "network", &c.runtime.network,
       "emulate: the network ALPHA,BETA[,binomial] (as chimera plan --network) priced into the "
       "simulator's per-step figure, which is then the planner's prediction of this run (\"\" = "
       "compute only)"},
      {"runtime", "wait", &c.runtime.wait,
       "doorbell (a waiting rank sleeps until a peer on its node rings) or poll"},
      {"runtime", "watchdog_s", &c.runtime.watchdog_s,
       "a rank waiting longer than this for a message or allreduce ends the job (-1 = auto: "
       "max(120 s, 20 x the median step), also bounding each step; 0 = off)"},
  };
}

std::string full_key(const Field& f) {
  return fmt::format("{}.{}", f.section, f.key);
}

Field* find_field(std::vector<Field>& fs, std::string_view section, std::string_view key) {
  for (auto& f : fs) {
    if (f.section == section && f.key == key) return &f;
  }
  return nullptr;
}

[[noreturn]] void unknown_key(std::string_view origin, std::string_view name) {
  const std::string hint = closest_match(name, Config::keys());
  if (hint.empty()) {
    throw InputError(fmt::format("{}: unknown config key '{}' (see `chimera train --help-config`)",
                                 origin, name));
  }
  throw InputError(
      fmt::format("{}: unknown config key '{}' (did you mean '{}'?)", origin, name, hint));
}

std::string_view type_name(const FieldRef& r) {
  return std::visit(
      [](auto* p) -> std::string_view {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::int64_t>) return "integer";
        if constexpr (std::is_same_v<T, double>) return "number";
        if constexpr (std::is_same_v<T, bool>) return "boolean";
        if constexpr (std::is_same_v<T, std::string> || std::is_enum_v<T>) return "string";
        if constexpr (std::is_same_v<T, std::vector<int>>) return "integer list";
        return "string list";
      },
      r);
}

// --- values from TOML ---------------------------------------------------------------

void assign_from_toml(Field& f, const toml::value& v, std::string_view origin) {
  const std::string name = full_key(f);
  auto bad = [&]() {
    throw InputError(
        fmt::format("{}: config key '{}' must be a {}", origin, name, type_name(f.ref)));
  };
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::int64_t>) {
          if (!v.is_integer()) bad();
          const auto x = v.as_integer();
          if constexpr (std::is_same_v<T, int>) {
            if (x < INT32_MIN || x > INT32_MAX) bad();
          }
          *p = static_cast<T>(x);
        } else if constexpr (std::is_same_v<T, double>) {
          if (v.is_floating()) {
            // TOML spells nan and inf: no key has a use for them (a learning rate of nan trains
            // nothing, a timeout of inf is spelled 0).
            if (!std::isfinite(v.as_floating())) {
              throw InputError(fmt::format("{}: config key '{}' = {}: expected a finite number",
                                           origin, name, v.as_floating()));
            }
            *p = v.as_floating();
          } else if (v.is_integer()) {
            *p = static_cast<double>(v.as_integer());
          } else {
            bad();
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) bad();
          *p = v.as_boolean();
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!v.is_string()) bad();
          *p = v.as_string().str;
        } else if constexpr (std::is_enum_v<T>) {
          if (!v.is_string()) bad();
          *p = parse_enum<T>(v.as_string().str);
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          if (!v.is_array()) bad();
          p->clear();
          for (const auto& e : v.as_array()) {
            if (!e.is_integer()) bad();
            p->push_back(static_cast<int>(e.as_integer()));
          }
        } else {
          // A single string is accepted as a one-element list: `train = "a.h5"`.
          p->clear();
          if (v.is_string()) {
            p->push_back(v.as_string().str);
          } else if (v.is_array()) {
            for (const auto& e : v.as_array()) {
              if (!e.is_string()) bad();
              p->push_back(e.as_string().str);
            }
          } else {
            bad();
          }
        }
      },
      f.ref);
}

// --- values from `--set` text -----------------------------------------------------------

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  std::string t(s);
  if (!t.empty() && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
  std::string item;
  std::istringstream is(t);
  while (std::getline(is, item, ',')) {
    const auto b = item.find_first_not_of(" \t\"'");
    const auto e = item.find_last_not_of(" \t\"'");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

template <typename T>
bool parse_number(std::string_view s, T& out) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  const auto r = std::from_chars(b, e, out);
  return r.ec == std::errc() && r.ptr == e;
}

void assign_from_text(Field& f, std::string_view text) {
  const std::string name = full_key(f);
  auto bad = [&]() {
    throw InputError(
        fmt::format("--set {}={}: '{}' is not a valid {}", name, text, text, type_name(f.ref)));
  };
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::int64_t> ||
                      std::is_same_v<T, double>) {
          T x{};
          if (!parse_number(text, x)) bad();
          if constexpr (std::is_same_v<T, double>) {
            // from_chars reads nan and inf, which no key has a use for.
            if (!std::isfinite(x)) {
              throw InputError(
                  fmt::format("--set {}={}: '{}' is not a finite number", name, text, text));
            }
          }
          *p = x;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (text == "true" || text == "1") {
            *p = true;
          } else if (text == "false" || text == "0") {
            *p = false;
          } else {
            bad();
          }
        } else if constexpr (std::is_same_v<T, std::string> || std::is_enum_v<T>) {
          std::string s(text);
          if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
            s = s.substr(1, s.size() - 2);
          }
          if constexpr (std::is_enum_v<T>) {
            *p = parse_enum<T>(s);
          } else {
            *p = s;
          }
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          p->clear();
          for (const auto& item : split_list(text)) {
            int x = 0;
            if (!parse_number(std::string_view(item), x)) bad();
            p->push_back(x);
          }
        } else {
          *p = split_list(text);
        }
      },
      f.ref);
}

// --- values to TOML text ----------------------------------------------------------------

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  out.push_back('"');
  return out;
}

std::string format_double(double x) {
  // Shortest text that reads back to the same double, always with a '.' or exponent so that
  // TOML reads it back as a float.
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string value_text(const FieldRef& r) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::int64_t>) {
          return fmt::format("{}", *p);
        } else if constexpr (std::is_same_v<T, double>) {
          return format_double(*p);
        } else if constexpr (std::is_same_v<T, bool>) {
          return *p ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quote(*p);
        } else if constexpr (std::is_enum_v<T>) {
          return quote(std::string(word_of(*p)));
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          return fmt::format("[{}]", fmt::join(*p, ", "));
        } else {
          std::vector<std::string> q;
          for (const auto& s : *p) q.push_back(quote(s));
          return fmt::format("[{}]", fmt::join(q, ", "));
        }
      },
      r);
}

}  // namespace

template <typename E>
E parse_enum(std::string_view text) {
  for (const auto& w : EnumWords<E>::words) {
    if (w.text == text) return w.value;
  }
  throw InputError(fmt::format("{} = '{}': {}", EnumWords<E>::key, text, EnumWords<E>::expected));
}

template ComputeMode parse_enum<ComputeMode>(std::string_view);
template WaitMode parse_enum<WaitMode>(std::string_view);
template BackendKind parse_enum<BackendKind>(std::string_view);
template MessagesMode parse_enum<MessagesMode>(std::string_view);
template AllreduceMode parse_enum<AllreduceMode>(std::string_view);
template NonfinitePolicy parse_enum<NonfinitePolicy>(std::string_view);
template SaveErrorPolicy parse_enum<SaveErrorPolicy>(std::string_view);

std::string_view to_string(ComputeMode v) {
  return word_of(v);
}
std::string_view to_string(WaitMode v) {
  return word_of(v);
}
std::string_view to_string(BackendKind v) {
  return word_of(v);
}
std::string_view to_string(MessagesMode v) {
  return word_of(v);
}
std::string_view to_string(AllreduceMode v) {
  return word_of(v);
}
std::string_view to_string(NonfinitePolicy v) {
  return word_of(v);
}
std::string_view to_string(SaveErrorPolicy v) {
  return word_of(v);
}

Config Config::from_toml(std::string_view text, std::string_view origin) {
  toml::value root;
  try {
    std::istringstream is{std::string(text)};
    root = toml::parse(is, std::string(origin));
  } catch (const std::exception& e) {
    // toml11's message spans several lines; the first names the problem and position.
    std::string msg = e.what();
    const auto nl = msg.find('\n');
    throw InputError(fmt::format("{}: invalid TOML: {}", origin,
                                 nl == std::string::npos ? msg : msg.substr(0, nl)));
  }
  Config c;
  auto fs = fields(c);
  if (!root.is_table()) throw InputError(fmt::format("{}: expected a TOML table", origin));
  for (const auto& [section, table] : root.as_table()) {
    if (!table.is_table()) unknown_key(origin, section);
    for (const auto& [key, value] : table.as_table()) {
      Field* f = find_field(fs, section, key);
      if (f == nullptr) unknown_key(origin, section + "." + key);
      assign_from_toml(*f, value, origin);
    }
  }
  return c;
}

Config Config::from_file(const std::string& path) {
  require_not_a_directory(path, "a TOML config file");
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("cannot open config file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return from_toml(ss.str(), path);
}

void Config::set(std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos) {
    throw InputError(
        fmt::format("--set '{}': expected section.key=value, e.g. train.lr=3e-4", assignment));
  }
  const std::string_view name = assignment.substr(0, eq);
  const auto dot = name.find('.');
  if (dot == std::string_view::npos) unknown_key("--set", name);
  auto fs = fields(*this);
  Field* f = find_field(fs, name.substr(0, dot), name.substr(dot + 1));
  if (f == nullptr) unknown_key("--set", name);
  assign_from_text(*f, assignment.substr(eq + 1));
}

std::string Config::to_toml() const {
  auto fs = fields(const_cast<Config&>(*this));
  std::string out;
  std::string_view section;
  for (const auto& f : fs) {
    if (f.section != section) {
      if (!out.empty()) out += "\n";
      out += fmt::format("[{}]\n", f.section);
      section = f.section;
    }
    out += fmt::format("{} = {}\n", f.key, value_text(f.ref));
  }
  return out;
}

std::uint64_t Config::hash() const {
  return fnv1a64(to_toml());
}

std::vector<Config::KeyDifference> Config::differences(const Config& a, const Config& b,
                                                       std::string_view section) {
  auto fa = fields(const_cast<Config&>(a));
  auto fb = fields(const_cast<Config&>(b));
  std::vector<KeyDifference> out;
  for (std::size_t i = 0; i < fa.size(); ++i) {
    if (fa[i].section != section) continue;
    std::string va = value_text(fa[i].ref), vb = value_text(fb[i].ref);
    if (va != vb) out.push_back({full_key(fa[i]), std::move(va), std::move(vb)});
  }
  return out;
}

std::vector<std::string> Config::keys() {
  Config c;
  std::vector<std::string> out;
  for (const auto& f : fields(c)) out.push_back(full_key(f));
  return out;
}

std::string Config::describe_keys() {
  Config c;
  std::string out;
  for (const auto& f : fields(c)) {
    out += fmt::format("  {:<28} {:<13} default {:<10} {}\n", full_key(f), type_name(f.ref),
                       value_text(f.ref), f.help);
  }
  return out;
}

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const unsigned char ch : bytes) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      }
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const std::size_t d = distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Suggest only near misses: at most a third of the word's letters wrong.
  return best_d <= std::max<std::size_t>(2, word.size() / 3) ? best : std::string();
}

}  // namespace chimera
