#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "chimera/io/metrics.hpp"
#include "chimera/io/trace.hpp"

namespace chimera::io {
namespace {

TEST(Metrics, OneValidJsonObjectPerLineWithTheContractKeys) {
  StepMetrics m;
  m.step = 7;
  m.loss = 3.25;
  m.lr = 6e-4;
  m.grad_norm = 0.5;
  m.iter_ms = 812.5;
  m.tokens_per_s = 1234.0;
  m.bubble_ratio = 0.2;
  m.core_wait_ratio = std::numeric_limits<double>::quiet_NaN();  // the kernel did not say
  m.peak_act_bytes = 123456789012;
  const auto j = nlohmann::json::parse(to_json_line(m));
  for (const char* key : {"step", "loss", "lr", "grad_norm", "iter_ms", "tokens_per_s",
                          "bubble_ratio", "core_wait_ratio", "peak_act_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["step"], 7);
  EXPECT_DOUBLE_EQ(j["lr"].get<double>(), 6e-4);
  EXPECT_EQ(j["peak_act_bytes"].get<std::int64_t>(), 123456789012);
  EXPECT_TRUE(j["core_wait_ratio"].is_null());
  EXPECT_FALSE(j.contains("val_loss"));
  EXPECT_EQ(j["skipped"], false);
  EXPECT_EQ(j["skipped_steps"], 0);
  m.skipped = true;
  m.skipped_steps = 3;
  const auto skipped = nlohmann::json::parse(to_json_line(m));
  EXPECT_EQ(skipped["skipped"], true);
  EXPECT_EQ(skipped["skipped_steps"], 3);
  m.val_loss = 2.5;
  m.loss = std::nan("");
  const auto k = nlohmann::json::parse(to_json_line(m));  // NaN must not break the JSON
  EXPECT_TRUE(k["loss"].is_null());
  EXPECT_DOUBLE_EQ(k["val_loss"].get<double>(), 2.5);
}

// Scripts read these lines as text too (jobscripts/lib/study.sh splits on `"iter_ms": `): the
// keys keep DESIGN's order and the layout its spaces.
TEST(Metrics, KeysInTheDesignOrderWithTheirSpaces) {
  StepMetrics m;
  m.step = 3;
  m.loss = 2.0;
  m.iter_ms = 12.5;
  m.core_wait_ratio = std::numeric_limits<double>::infinity();
  m.val_loss = 1.5;
  EXPECT_EQ(to_json_line(m),
            "{\"step\": 3, \"loss\": 2.0, \"lr\": 0.0, \"grad_norm\": 0.0, \"iter_ms\": 12.5, "
            "\"tokens_per_s\": 0.0, \"bubble_ratio\": 0.0, \"core_wait_ratio\": null, "
            "\"peak_act_bytes\": 0, \"skipped\": false, \"skipped_steps\": 0, \"val_loss\": 1.5}");
}

TEST(Metrics, AppendKeepsEarlierSteps) {
  const auto path = std::filesystem::temp_directory_path() / "chimera_metrics_test.jsonl";
  {
    MetricsWriter w(path.string(), false);
    w.write(StepMetrics{1, 1.0, 0, 0, 0, 0, 0, 0, 0, false, 0, {}});
  }
  {
    MetricsWriter w(path.string(), true);
    w.write(StepMetrics{2, 1.0, 0, 0, 0, 0, 0, 0, 0, false, 0, {}});
  }
  std::ifstream in(path);
  std::string a, b, c;
  std::getline(in, a);
  std::getline(in, b);
  EXPECT_FALSE(std::getline(in, c));
  EXPECT_EQ(nlohmann::json::parse(a)["step"], 1);
  EXPECT_EQ(nlohmann::json::parse(b)["step"], 2);
  std::filesystem::remove(path);
}

TEST(Trace, SerializesAndWritesChromeFormat) {
  std::vector<TraceEvent> r0 = {{"F0 s0 down", TraceLane::Compute, 0.0, 10.5, 1},
                                {"allreduce stage 0", TraceLane::Allreduce, 5.0, 20.0, 1}};
  std::vector<TraceEvent> r1 = {{"wait X0 s0", TraceLane::P2P, 1.25, 9.0, 1}};
  const auto back = parse_events(serialize_events(r0));
  ASSERT_EQ(back.size(), 2U);
  EXPECT_EQ(back[0].name, "F0 s0 down");
  EXPECT_EQ(back[1].lane, TraceLane::Allreduce);
  EXPECT_DOUBLE_EQ(back[0].dur_us, 10.5);

  const auto path = std::filesystem::temp_directory_path() / "chimera_trace_test.json";
  write_chrome_trace(path.string(), {r0, r1});
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  int complete = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    if (e["name"] == "wait X0 s0") {
      EXPECT_EQ(e["pid"], 1);
      EXPECT_EQ(e["tid"], 1);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.25);
    }
  }
  EXPECT_EQ(complete, 3);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace chimera::io
