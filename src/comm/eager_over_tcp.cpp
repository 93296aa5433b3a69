#include "chimera/comm/eager_over_tcp.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace chimera::comm {

namespace {

// Whether the launcher placed this job's ranks on more than one host.
bool spans_hosts(const EnvLookup& env) {
  const auto number = [&](const char* name) {
    const char* value = env(name);
    return value == nullptr ? 0 : std::atoi(value);
  };
  if (number("SLURM_STEP_NUM_NODES") > 1) return true;
  const int size = number("OMPI_COMM_WORLD_SIZE");
  const int local = number("OMPI_COMM_WORLD_LOCAL_SIZE");
  return local > 0 && size > local;
}

bool has_rdma_device(const char* dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  return !error && it != std::filesystem::directory_iterator();
}

}  // namespace

bool eager_over_tcp_wanted(const EnvLookup& env, const char* rdma_devices) {
  return env("UCX_RNDV_THRESH") == nullptr && spans_hosts(env) && !has_rdma_device(rdma_devices);
}

std::string send_eagerly_over_tcp(const char* rdma_devices) {
  if (!eager_over_tcp_wanted([](const char* name) { return std::getenv(name); }, rdma_devices))
    return {};
  setenv("UCX_RNDV_THRESH", "inf", 1);
  return "messages between hosts go over TCP here (no RDMA device): sent eagerly "
         "(UCX_RNDV_THRESH=inf), so that they move while their sender computes; set "
         "UCX_RNDV_THRESH to choose otherwise";
}

}  // namespace chimera::comm
