#include "runtime_testing.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "chimera/core/log.hpp"
#include "chimera/data/dataset_writer.hpp"
#include "chimera/model/gpt2_config.hpp"
#include "chimera/model/parameters.hpp"
#include "chimera/model/partition.hpp"

namespace chimera::testing {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::string job_temp_dir(const std::string& tag) {
  // Rank 0's pid names the directory, so concurrent jobs (ctest -j) never share one.
  int pid = static_cast<int>(::getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const auto dir =
      std::filesystem::temp_directory_path() / ("chimera_" + tag + "_" + std::to_string(pid));
  if (world_rank() == 0) std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir.string();
}

void write_test_dataset(const std::string& path, int tokens, unsigned seed) {
  if (world_rank() == 0 && !std::filesystem::exists(path)) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<std::int32_t> token(0, 95);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
    for (auto& t : ids) t = token(gen);
    data::TokenDatasetWriter w(path, 96, 95, "test");
    w.append(ids);
    w.finish();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

Config tiny_config(const std::string& train, const std::string& scheme, int stages,
                   int micro_batches, int micro_batch_size) {
  Config c;
  c.model = ModelConfig{8, 32, 2, 16, 96};
  c.parallel.scheme = scheme;
  c.parallel.stages = stages;
  c.parallel.micro_batches = micro_batches;
  c.parallel.micro_batch_size = micro_batch_size;
  c.data.train = {train};
  c.data.seq_len = 8;
  c.train.steps = 3;
  c.train.lr = 1e-2;
  c.train.min_lr = 1e-3;
  c.train.warmup_steps = 1;
  c.train.grad_clip = 0.5;  // small enough to clip: the global norm must be right
  // AdamW divides every gradient by its own running magnitude, so where the true gradient is 0
  // (the attention key bias: softmax ignores a constant shift of the keys) the update is
  // lr * sign(rounding noise). A pipeline sums micro-batches in another (equally valid) order than
  // one process, so with the default eps those elements would differ by O(lr) and hide what is
  // compared. eps = 1e-4 keeps ordinary elements Adam-like (|g| >> eps) and noise-only ones still.
  c.train.eps = 1e-4;
  return c;
}

std::unique_ptr<runtime::Trainer> train(const Config& config, MPI_Comm comm, bool resume,
                                        int stop_after) {
  const auto level = log::level();
  log::set_level(log::Level::Warn);
  runtime::TrainRequest req;
  req.config = config;
  req.resume = resume;
  req.stop_after = stop_after;
  auto t = std::make_unique<runtime::Trainer>(req, comm);
  t->run();
  log::set_level(level);
  return t;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

std::vector<std::string> tensor_names(const Config& config) {
  const auto gpt2 = model::GPT2Config::from(config.model);
  const model::ParameterLayout layout(gpt2, model::StagePartition({gpt2.n_layer}));
  std::vector<std::string> names;
  for (const auto* t : layout.all()) names.push_back(t->name);
  return names;
}

}  // namespace chimera::testing
