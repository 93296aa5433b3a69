#pragma once
// The run configuration: TOML with sections [model] [parallel] [data] [train] [checkpoint] [log]
// [runtime] (docs/DESIGN.md §6). Every key has a typed field here, a default, and one line of
// help; `--set section.key=value` overrides any of them. Unknown keys and wrong types are input
// errors (exit status 2) that name the key and, where one is close, the key that was meant.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chimera {

// runtime.watchdog_s: derive the limit from the run (runtime/step_watchdog.hpp).
inline constexpr double kWatchdogAuto = -1.0;

// The keys whose value is one of a few words. The TOML and `--set` spelling of each value is its
// to_string; parse_enum<E> reads that spelling once, when the config is read, and anything else
// is an InputError naming the key and the allowed words.
enum class ComputeMode { Real, Emulate };        // runtime.compute: real | emulate
enum class WaitMode { Doorbell, Poll };          // runtime.wait: doorbell | poll
enum class BackendKind { Cpu, Cuda };            // runtime.backend: cpu | cuda
enum class MessagesMode { Auto, Device, Host };  // runtime.messages: auto | device | host
enum class AllreduceMode { Auto, Nccl, Mpi };    // runtime.allreduce: auto | nccl | mpi
enum class NonfinitePolicy { Stop, Skip };       // train.on_nonfinite: stop | skip
enum class SaveErrorPolicy { Stop, Warn };       // checkpoint.on_save_error: stop | warn

std::string_view to_string(ComputeMode v);
std::string_view to_string(WaitMode v);
std::string_view to_string(BackendKind v);
std::string_view to_string(MessagesMode v);
std::string_view to_string(AllreduceMode v);
std::string_view to_string(NonfinitePolicy v);
std::string_view to_string(SaveErrorPolicy v);

// The value spelled `text`, or an InputError such as "runtime.wait = 'x': expected 'doorbell' or
// 'poll'". Defined for the enums above.
template <typename E>
E parse_enum(std::string_view text);

struct ModelConfig {
  int n_layer = 4;
  int n_embd = 256;
  int n_head = 4;
  int n_ctx = 256;
  int vocab_size = 50257;
};

struct ParallelConfig {
  std::string scheme = "chimera";  // gpipe | 1f1b | gems | interleaved | chimera | zb-h1
  int stages = 4;                  // D: workers of one pipeline group
  int micro_batches = 4;           // N: micro-batches per pipeline group and iteration
  int micro_batch_size = 1;        // B: samples per micro-batch
  std::string variant = "direct";  // chimera: direct | doubling | halving
  int pipes = 0;                   // chimera: number of pipelines 2f (0 = the scheme's default)
  int virtual_stages = 0;          // interleaved: v model stages per worker, 0 = 2 (key `virtual`)
  int max_in_flight = 0;           // chimera-zb: most chunk-activations per worker, 0 = 2D
  bool recompute = false;          // keep only stage inputs; recompute the forward in backward
  bool shard_optimizer = true;     // AdamW moments split over each stage's holders (ZeRO-1)
  std::vector<int> partition;      // explicit blocks per model stage (empty = balanced)
};

struct DataConfig {
  std::vector<std::string> train;  // HDF5 token shards
  std::vector<std::string> val;
  int seq_len = 128;     // T
  bool prefetch = true;  // read the next step's samples while this step computes
};

struct TrainConfig {
  int steps = 10;
  double lr = 6e-4;
  double min_lr = 6e-5;
  int warmup_steps = 0;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // global-norm clip; 0 disables
  std::int64_t seed = 1337;
  int eval_every = 0;          // validation loss every K steps (0 = never)
  int eval_batches = 4;        // global batches of the val split per evaluation
  int max_skipped_steps = 10;  // skip: stop after this many consecutive skipped steps
  // A non-finite loss or gradient norm: stop, or skip the update.
  NonfinitePolicy on_nonfinite = NonfinitePolicy::Stop;
};

struct CheckpointConfig {
  std::string dir;                // save directory ("" = no checkpoints)
  int every = 0;                  // save every K steps (0 = only at the end when dir is set)
  int keep = 3;                   // keep the last K checkpoints
  double save_timeout_s = 600.0;  // a save still running after this ends the job (0 = off)
  // A failed save: stop (status 1), or warn and go on.
  SaveErrorPolicy on_save_error = SaveErrorPolicy::Stop;
  // Write the file on a helper thread from a host snapshot while training goes on.
  bool async = true;
};

struct LogConfig {
  int every = 1;              // per-step log line every K steps
  std::string metrics;        // JSON-lines metrics file
  std::string trace;          // Chrome trace file
  int sample_tokens = 0;      // tokens of a text sample printed with each validation loss
  std::string sample_prompt;  // its prompt: text (GPT-2 vocabulary) or token ids; "" = start
  std::string tokenizer = "inputs/gpt2-tokenizer";  // GPT-2's tokenizer files, for samples
};

struct RuntimeConfig {
  BackendKind backend = BackendKind::Cpu;
  // The CUDA backend's GEMM arithmetic: fp32 | bf16 | tf32. A string, as the backend names it.
  std::string precision = "fp32";
  MessagesMode messages = MessagesMode::Auto;     // cuda: device (CUDA-aware MPI) | host (staged)
  AllreduceMode allreduce = AllreduceMode::Auto;  // cuda: nccl | mpi
  // cuda: let device-buffer MPI messages and NCCL sums run at once (may deadlock: docs/cuda.md)
  bool device_mpi_with_nccl = false;
  ComputeMode compute = ComputeMode::Real;
  std::string cost;  // emulate: "F:B[:W]" milliseconds per stage op
  // emulate: the network ("ALPHA,BETA[,binomial]", as `chimera plan --network` takes it) whose
  // messages and gradient sums the simulator's per-step figure then includes ("" = none).
  std::string network;
  // doorbell: a waiting rank sleeps until a peer on its node rings; poll: in short slices.
  WaitMode wait = WaitMode::Doorbell;
  // A rank waiting longer than this in one op ends the job (0 = off; -1 = auto, derived from the
  // run's step times: runtime/step_watchdog.hpp).
  double watchdog_s = -1.0;  // kWatchdogAuto
};

struct Config {
  ModelConfig model;
  ParallelConfig parallel;
  DataConfig data;
  TrainConfig train;
  CheckpointConfig checkpoint;
  LogConfig log;
  RuntimeConfig runtime;

  // Parse TOML text; `origin` names the source in error messages.
  static Config from_toml(std::string_view text, std::string_view origin = "<config>");
  static Config from_file(const std::string& path);

  // Apply one `section.key=value` override.
  void set(std::string_view assignment);

  // Canonical TOML text with every key: stored in checkpoints, hashed for the cross-rank check.
  std::string to_toml() const;
  std::uint64_t hash() const;

  // The keys of `section` whose values differ between `a` and `b`, with both values as TOML text.
  struct KeyDifference {
    std::string key;  // "section.key"
    std::string a;
    std::string b;
  };
  static std::vector<KeyDifference> differences(const Config& a, const Config& b,
                                                std::string_view section);

  // Every key as "section.key", for --help texts and suggestions.
  static std::vector<std::string> keys();
  // One line per key: "section.key (type, default X): help".
  static std::string describe_keys();
};

// 64-bit FNV-1a: stable across compilers and runs, for configuration fingerprints.
std::uint64_t fnv1a64(std::string_view bytes);

// The closest candidate by edit distance, or "" when none is close enough to suggest.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace chimera
