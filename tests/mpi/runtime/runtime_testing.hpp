#pragma once
// Helpers for the runtime's MPI tests: a tiny GPT-2 configuration, a token dataset written once
// per job, and tensor comparison.
#include <mpi.h>

#include <string>
#include <vector>

#include "chimera/core/config.hpp"
#include "chimera/runtime/trainer.hpp"

namespace chimera::testing {

int world_rank();
int world_size();

// A directory shared by the ranks of this job (rank 0 creates it; all agree on the name).
std::string job_temp_dir(const std::string& tag);

// Rank 0 writes a random-token dataset (vocab 96) at `path`; every rank returns after it exists.
void write_test_dataset(const std::string& path, int tokens, unsigned seed);

// A tiny GPT-2 (L=8, C=32, H=2, T=8, V=96) on `train` with the given layout, 3 steps.
Config tiny_config(const std::string& train, const std::string& scheme, int stages,
                   int micro_batches, int micro_batch_size);

// Runs a trainer over `comm` quietly; returns it for inspection.
std::unique_ptr<runtime::Trainer> train(const Config& config, MPI_Comm comm, bool resume = false,
                                        int stop_after = 0);

// ||a - b|| / ||b||, the relative error of a whole tensor.
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

// Every tensor name of the tiny model (weights).
std::vector<std::string> tensor_names(const Config& config);

}  // namespace chimera::testing
