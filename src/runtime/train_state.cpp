#include "chimera/runtime/train_state.hpp"

#include <algorithm>
#include <cmath>

#include "chimera/comm/agreement.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/io/init_weights.hpp"
#include "chimera/optim/clip.hpp"
#include "read_once.hpp"

namespace chimera::runtime {

namespace {
bool owns_tensor(const comm::Topology& topo, const model::TensorInfo& t) {
  return topo.owns(t.stage == model::kTiedStage ? 0 : t.stage);
}
}  // namespace

void read_weights(const io::CheckpointReader& reader, model::GPT2Worker& worker) {
  for (const auto* t : worker.tensors()) {
    std::vector<float> host(t->numel);
    reader.read(t->name, host);
    worker.write_tensor(*t, worker.params_of(*t), host);
  }
}

TrainState::TrainState(const RunPlan& plan, backend::Backend& backend, model::GPT2Worker& worker,
                       const comm::Communicators& comms)
    : plan_(plan),
      backend_(backend),
      worker_(worker),
      comms_(comms),
      adamw_(optim::AdamWConfig::from(plan.config.train)) {
  // With parallel.shard_optimizer a holder keeps the moments of its shard only: that is the
  // memory the sharding saves.
  const bool shard = plan.config.parallel.shard_optimizer;
  auto add = [&](int key, std::size_t count, MPI_Comm comm, std::vector<optim::ParamRange> ranges) {
    std::size_t floats = count;
    if (shard) {
      const auto layout = comm::ShardLayout::of(count, comm);
      ranges = optim::shard_ranges(ranges, layout.begin(), layout.end());
      floats = layout.size();
      shards_.emplace(key, Shard{layout});
    }
    moments_[key] = std::make_unique<optim::AdamWMoments>(backend_, floats);
    ranges_[key] = std::move(ranges);
  };
  for (const int s : worker_.stages()) {
    std::vector<optim::ParamRange> ranges;
    for (const auto& t : worker_.layout().stage_tensors(s))
      ranges.push_back(optim::ParamRange{t.offset, t.numel, t.weight_decay});
    add(s, worker_.params(s).count, comms_.stage(s), std::move(ranges));
  }
  if (worker_.holds_tied()) {
    const auto tied = worker_.tied_params();
    // The padded rows take part: their parameters and gradients are zero, so they stay zero.
    add(model::kTiedStage, tied.count, comms_.tied(),
        {optim::ParamRange{0, tied.count, worker_.layout().tied().weight_decay}});
  }
}

float* TrainState::weights(int key) {
  return key == model::kTiedStage ? worker_.tied_params().data : worker_.params(key).data;
}

const float* TrainState::update_grads(int key) {
  const float* g = key == model::kTiedStage ? worker_.tied_grads().data : worker_.grads(key).data;
  return sharded() ? g + shard_layout(key).begin() : g;
}

double TrainState::local_grad_squares() {
  const auto& topo = plan_.topology;
  local_squares_.clear();
  double local = 0.0;
  if (sharded()) {
    // The shards of a buffer cover it once over its holders: every holder adds its own.
    for (auto& [key, shard] : shards_) {
      local += local_squares_[key] =
          optim::sum_of_squares(backend_, update_grads(key), shard.layout.size());
    }
    return local;
  }
  for (const int s : worker_.stages()) {
    if (topo.owns(s)) {
      const auto g = worker_.grads(s);
      local += local_squares_[s] = optim::sum_of_squares(backend_, g.data, g.count);
    }
  }
  if (worker_.holds_tied() && topo.owns(0)) {
    const auto g = worker_.tied_grads();
    local += local_squares_[model::kTiedStage] = optim::sum_of_squares(backend_, g.data, g.count);
  }
  return local;
}

std::vector<int> TrainState::nonfinite_grad_stages() const {
  // Slot 0 is the tied embedding, slot s + 1 model stage s.
  std::vector<int> flags(static_cast<std::size_t>(plan_.schedule.stages) + 1, 0);
  for (const auto& [key, squares] : local_squares_)
    flags[static_cast<std::size_t>(key + 1)] = std::isfinite(squares) ? 0 : 1;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, flags.data(), static_cast<int>(flags.size()), MPI_INT,
                          MPI_MAX, comms_.world()));
  std::vector<int> stages;
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (flags[i] != 0) stages.push_back(static_cast<int>(i) - 1);
  return stages;
}

void TrainState::optimizer_step(int step, double lr, double grad_scale) {
  for (auto& [key, moments] : moments_) {
    float* p = weights(key);
    if (sharded()) {
      // The all-gather completes the rest: the backend does not see it write, so every bf16
      // copy of these weights goes stale now (a rank whose shard is empty updates none of
      // them itself). Nothing reads them before the stage's gather has been waited for.
      const comm::ShardLayout& layout = shard_layout(key);
      backend_.weights_written_outside(p, layout.total() * sizeof(float));
      p += layout.begin();
    }
    optim::adamw_step(backend_, adamw_, step + 1, lr, grad_scale, p, update_grads(key), *moments,
                      ranges_.at(key));
  }
}

std::vector<io::TensorSpec> TrainState::specs(bool with_moments) const {
  std::vector<io::TensorSpec> out;
  for (const auto* t : worker_.layout().all()) out.push_back(io::TensorSpec{t->name, t->shape});
  if (with_moments) {
    for (const auto* t : worker_.layout().all()) {
      out.push_back(io::TensorSpec{io::exp_avg_name(t->name), t->shape});
      out.push_back(io::TensorSpec{io::exp_avg_sq_name(t->name), t->shape});
    }
  }
  return out;
}

void TrainState::snapshot(CheckpointSnapshot& out, bool live_if_host) const {
  const auto& topo = plan_.topology;
  out.tensors.clear();
  // The CPU backend's buffers hold each tensor contiguously in Hugging Face layout
  // (GPT2Worker::read_tensor is a plain copy), so they can be written as they are.
  out.live = live_if_host && plan_.config.runtime.backend == BackendKind::Cpu;
  if (save_comm() == MPI_COMM_NULL) return;
  const auto all = worker_.layout().all();
  // Host copies (Hugging Face layout) of the tensors this rank owns: weights, then moments. The
  // buffers of an earlier snapshot are reused: allocating and first touching hundreds of MB
  // again would cost more than the copy.
  std::size_t owned = 0;
  auto add = [&](const model::TensorInfo& t, std::string name, const float* buffer) {
    std::span<const float> data;
    if (buffer != nullptr && out.live) {
      data = std::span<const float>(buffer + t.offset, t.numel);
    } else if (buffer != nullptr) {
      if (owned == out.host.size()) out.host.emplace_back();
      auto& host = out.host[owned++];
      host.resize(t.numel);
      worker_.read_tensor(t, buffer, host);
      data = host;
    }
    out.tensors.push_back(io::TensorData{io::TensorSpec{std::move(name), t.shape}, data});
  };
  // A sharded moment: the part of the tensor in this rank's shard (Hugging Face layout), as it
  // is (live host memory, the CPU backend) or copied from backend memory.
  auto add_part = [&](const model::TensorInfo& t, std::string name, const float* shard) {
    io::TensorData d{io::TensorSpec{std::move(name), t.shape}, {}};
    if (shard != nullptr) {
      const auto& layout = shard_layout(t.stage);
      const std::size_t lo = std::max(t.offset, layout.begin());
      const std::size_t hi = std::min(t.offset + t.numel, layout.end());
      if (lo < hi) {
        std::span<const float> part(shard + (lo - layout.begin()), hi - lo);
        if (!out.live) {
          if (owned == out.host.size()) out.host.emplace_back();
          auto& host = out.host[owned++];
          host.resize(part.size());
          backend_.copy_to_host(host.data(), part.data(), part.size_bytes());
          part = host;
        }
        d.data = part;
        d.first = static_cast<std::int64_t>(lo - t.offset);
      }
    }
    out.tensors.push_back(std::move(d));
  };
  for (const auto* t : all) {
    const bool mine = topo.replica == 0 && owns_tensor(topo, *t);
    add(*t, t->name, mine ? worker_.params_of(*t) : nullptr);
  }
  for (const auto* t : all) {
    if (sharded()) {
      const auto it = moments_.find(t->stage);  // every holder writes its part
      const auto* m = it != moments_.end() ? it->second.get() : nullptr;
      add_part(*t, io::exp_avg_name(t->name), m != nullptr ? m->m.f32() : nullptr);
      add_part(*t, io::exp_avg_sq_name(t->name), m != nullptr ? m->v.f32() : nullptr);
      continue;
    }
    const auto* m = owns_tensor(topo, *t) ? moments_.at(t->stage).get() : nullptr;
    add(*t, io::exp_avg_name(t->name), m != nullptr ? m->m.f32() : nullptr);
    add(*t, io::exp_avg_sq_name(t->name), m != nullptr ? m->v.f32() : nullptr);
  }
  if (!out.live) out.host.resize(owned);
  // Tensors must be listed in the same order on every rank: weights, then (exp_avg, exp_avg_sq)
  // per tensor, which the loops above keep.
}

MPI_Comm TrainState::save_comm() const {
  // Every owner is in replica 0, so only its pipeline group writes: D ranks, however many
  // replicas hold the same weights. Sharded moments are spread over every replica: every rank
  // writes its parts.
  if (sharded()) return comms_.world();
  return plan_.topology.replica == 0 ? comms_.pipeline() : MPI_COMM_NULL;
}

std::string TrainState::save(const io::CheckpointDirectory& dir, const io::CheckpointMeta& meta) {
  if (save_comm() == MPI_COMM_NULL) return {};
  CheckpointSnapshot s;
  snapshot(s);
  return dir.save(save_comm(), s.tensors, meta);
}

// Each held tensor comes from its owner's single read of the file (ReadOnceLoader); rank 0
// alone checks the file against the model before any value is read.
void TrainState::resume(const std::string& path) {
  ReadOnceLoader loader(plan_.topology, comms_);
  comm::all_or_none(comms_.world(), [&] {
    loader.open(path);
    if (plan_.topology.rank == 0) loader.reader()->expect(specs(true));
  });
  comm::all_or_none(comms_.world(), [&] {
    for (const auto* t : worker_.tensors()) {
      std::vector<float> host(t->numel);
      auto& m = *moments_.at(t->stage);
      loader.fetch(*t, t->name, host);
      worker_.write_tensor(*t, worker_.params_of(*t), host);
      loader.fetch(*t, io::exp_avg_name(t->name), host);
      write_moment(*t, m.m.f32(), host);
      loader.fetch(*t, io::exp_avg_sq_name(t->name), host);
      write_moment(*t, m.v.f32(), host);
    }
    loader.finish();
  });
  last_load_bytes_ = loader.total_bytes_read();
}

void TrainState::write_moment(const model::TensorInfo& t, float* moment,
                              std::span<const float> host) {
  if (!sharded()) {
    worker_.write_tensor(t, moment, host);
    return;
  }
  // The part of the tensor inside this rank's shard (Hugging Face layout), into backend memory.
  const auto& layout = shard_layout(t.stage);
  const std::size_t lo = std::max(t.offset, layout.begin());
  const std::size_t hi = std::min(t.offset + t.numel, layout.end());
  if (lo < hi) {
    backend_.copy_from_host(moment + (lo - layout.begin()), host.data() + (lo - t.offset),
                            (hi - lo) * sizeof(float));
  }
}

std::string TrainState::init(const std::string& path) {
  ReadOnceLoader loader(plan_.topology, comms_);
  io::InitWeights init;
  // Rank 0 matches the file's names to the model's; the readers get the names they read.
  comm::all_or_none(comms_.world(), [&] {
    loader.open(path);
    if (plan_.topology.rank == 0) init = io::match_init_weights(*loader.reader(), specs(false));
  });
  std::string names;
  for (const auto& [model_name, file_name] : init.file_name)
    names += model_name + '\n' + file_name + '\n';
  names = comm::broadcast(comms_.world(), names, 0);
  init.conversions = comm::broadcast(comms_.world(), init.conversions, 0);
  for (std::size_t at = 0; at < names.size();) {
    const std::size_t a = names.find('\n', at), b = names.find('\n', a + 1);
    init.file_name[names.substr(at, a - at)] = names.substr(a + 1, b - a - 1);
    at = b + 1;
  }
  comm::all_or_none(comms_.world(), [&] {
    for (const auto* t : worker_.tensors()) {
      std::vector<float> host(t->numel);
      loader.fetch(*t, init.file_name.at(t->name), host);
      worker_.write_tensor(*t, worker_.params_of(*t), host);
    }
    loader.finish();
  });
  last_load_bytes_ = loader.total_bytes_read();
  return init.conversions;
}

std::optional<std::vector<float>> TrainState::host_tensor(const std::string& name) const {
  std::string base = name;
  int moment = 0;  // 0 weights, 1 exp_avg, 2 exp_avg_sq
  for (const int k : {1, 2}) {
    const std::string prefix = k == 1 ? io::exp_avg_name("") : io::exp_avg_sq_name("");
    if (name.rfind(prefix, 0) == 0) {
      base = name.substr(prefix.size());
      moment = k;
    }
  }
  for (const auto* t : worker_.tensors()) {
    if (t->name != base) continue;
    std::vector<float> host(t->numel);
    const float* buffer = worker_.params_of(*t);
    if (moment != 0 && sharded()) return std::nullopt;  // held as shards only
    if (moment != 0) {
      const auto& m = *moments_.at(t->stage);
      buffer = moment == 1 ? m.m.f32() : m.v.f32();
    }
    worker_.read_tensor(*t, buffer, host);
    return host;
  }
  return std::nullopt;
}

}  // namespace chimera::runtime
