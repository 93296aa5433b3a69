#pragma once
// Loading a checkpoint at scale: every tensor is read from the file once per job, by its owner
// (replica 0, comm::Topology::owner_rank), and broadcast to the other ranks that hold it over the
// communicator that already connects them (its stage's, or the tied embedding's). Chimera holds
// each stage on 2W ranks: reading on every holder would read the file 2W times per requeue.
//
// Memory: besides its own state, a rank holds one tensor in host memory at a time (the largest is
// wte, V x C floats), as a per-rank read does; broadcasts go in pieces of at most 256 MiB.
#include <mpi.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/topology.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/model/parameters.hpp"

namespace chimera::runtime {

// Rank 0 reads the checkpoint's attributes and every rank gets them. Collective over `world`;
// an AgreedError (InputError's status) on every rank when rank 0 cannot read them.
io::CheckpointMeta read_meta_once(MPI_Comm world, const std::string& path);

// "; read 192.6 MB of tensors from the 192.6 MB file (1.00x its size, all ranks together)", for
// the resume and init log lines.
std::string describe_load(const std::string& path, std::int64_t bytes_read);

class ReadOnceLoader {
 public:
  ReadOnceLoader(const comm::Topology& topo, const comm::Communicators& comms);

  // Opens the file on the ranks that read (the owners of some tensor); the others never touch
  // it. Not collective: run it inside comm::all_or_none.
  void open(const std::string& path);
  // The open file on a reading rank, nullptr elsewhere.
  const io::CheckpointReader* reader() const { return reader_ ? &*reader_ : nullptr; }

  // Collective over the holders of `t` (every rank holding it calls it for the same tensors in
  // the same order: the tied embedding first, then by stage): `host` (t.numel floats) receives
  // the file's tensor `file_name`. A failed read does not leave the holders waiting: the owner
  // broadcasts the failure instead of the data, and finish() throws it.
  void fetch(const model::TensorInfo& t, const std::string& file_name, std::span<float> host);
  // After every fetch: an InputError with the first failure on this rank (the owner's message,
  // or on a holder that the owner of a tensor could not read it).
  void finish() const;

  // Collective over the world: the stored bytes of tensor values read from the file, summed
  // over ranks.
  std::int64_t total_bytes_read() const;

 private:
  MPI_Comm comm_of(const model::TensorInfo& t) const;
  int root_of(const model::TensorInfo& t) const;

  const comm::Topology& topo_;
  const comm::Communicators& comms_;
  std::optional<io::CheckpointReader> reader_;
  int tied_root_ = 0;  // the tied embedding's owner, as a rank of comms.tied()
  std::string failure_;
};

}  // namespace chimera::runtime
