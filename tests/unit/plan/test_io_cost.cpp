// The planner's checkpoint I/O: file size, writers, the two save modes' stalls and resume time.
#include <gtest/gtest.h>

#include "chimera/core/error.hpp"
#include "chimera/plan/io_cost.hpp"

namespace chimera::plan {
namespace {

Layout layout(const std::string& scheme, int W, int D) {
  Layout l;
  l.scheme = scheme;
  l.W = W;
  l.D = D;
  return l;
}

TEST(IoCost, BandwidthsParseInDecimalUnits) {
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("100GB/s", "--fs-bandwidth"), 1e8);
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms(" 800 MB/s", "--fs-bandwidth"), 8e5);
  for (const char* bad : {"0GB/s", "10", "10GB/h", "-1GB/s", "fast"})
    EXPECT_THROW(parse_bandwidth_bytes_per_ms(bad, "--fs-bandwidth"), InputError) << bad;
}

TEST(IoCost, WritersAreTheStageOwnersAndTheSlowerOfFileSystemAndTheirLinksBinds) {
  const Network net{0.01, 1e-7};  // 10 GB/s
  FileSystem fs{1e8, 1e6, 1e7};   // 100 GB/s in all, 1 GB/s per node, 10 GB/s snapshots
  const double params = 1e9;      // a 12 GB checkpoint
  const IoPrediction chimera = predict_io(params, layout("chimera", 256, 8), net, fs, 1000, 0);
  EXPECT_DOUBLE_EQ(chimera.checkpoint_bytes, 12e9);
  EXPECT_EQ(chimera.writers, 4);  // worker p owns stages p and D-1-p
  EXPECT_EQ(chimera.holders, 512);
  EXPECT_DOUBLE_EQ(chimera.write_ms, 12e9 / 4e6);  // four 1 GB/s links, not 100 GB/s
  EXPECT_DOUBLE_EQ(chimera.sync_stall_ms, chimera.write_ms);
  EXPECT_DOUBLE_EQ(chimera.async_stall_ms, 3e9 / 1e7);  // the snapshot alone
  EXPECT_DOUBLE_EQ(chimera.resume_read_ms, chimera.write_ms);
  EXPECT_GT(chimera.resume_broadcast_ms, 0.0);
  // Every one of the 2,048 ranks reading its part moves 512 times the file through 100 GB/s.
  EXPECT_DOUBLE_EQ(chimera.every_holder_reads_ms, 512 * 12e9 / 1e8);

  Layout four_pipes = layout("chimera", 64, 32);
  four_pipes.pipes = 4;
  const IoPrediction four = predict_io(params, four_pipes, net, fs, 1000, 0);
  EXPECT_EQ(four.writers, 8);
  EXPECT_EQ(four.holders, 256);

  const IoPrediction one_f_one_b = predict_io(params, layout("1f1b", 256, 8), net, fs, 1000, 0);
  EXPECT_EQ(one_f_one_b.writers, 8);
  EXPECT_EQ(one_f_one_b.holders, 256);
  EXPECT_DOUBLE_EQ(one_f_one_b.write_ms, 12e9 / 8e6);
}

TEST(IoCost, AnAsynchronousSaveWaitsWhenItsWriteOutlastsTheStepsBetweenSaves) {
  const Network net{0.01, 1e-7};
  const FileSystem fs{1e8, 1e6, 1e7};
  const Layout l = layout("1f1b", 1, 4);
  const IoPrediction roomy = predict_io(1e9, l, net, fs, 1000, 10000);
  const IoPrediction tight = predict_io(1e9, l, net, fs, 1000, 1);
  EXPECT_DOUBLE_EQ(roomy.async_stall_ms, 3e9 / 1e7);
  EXPECT_DOUBLE_EQ(tight.async_stall_ms, 3e9 / 1e7 + (tight.write_ms - 1000));
  EXPECT_EQ(roomy.resume_broadcast_ms, 0.0);  // W = 1: the reader is the only holder
}

}  // namespace
}  // namespace chimera::plan
