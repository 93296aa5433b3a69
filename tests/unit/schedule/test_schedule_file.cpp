// make_schedule with scheme file:PATH: a schedule JSON or torch CSV, verified, D and N checked.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/json.hpp"
#include "chimera/schedule/torch_csv.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::request;

std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string input_error(const ScheduleRequest& r) {
  try {
    (void)make_schedule(r);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << r.scheme;
  return {};
}

TEST(ScheduleFile, RunsAJsonOrCsvScheduleAsItIs) {
  const Schedule chimera = make_schedule(request("chimera", 4, 8));
  const std::string json = write("file_scheme.json", schedule_to_json(chimera));
  for (const ScheduleRequest& r : {request("file:" + json, 4, 8), request("file:" + json, 0, 0)}) {
    const Schedule s = make_schedule(r);
    EXPECT_EQ(s.ops, chimera.ops);
    EXPECT_EQ(s.placement, chimera.placement);
    EXPECT_EQ(s.scheme, "chimera");
  }
  const Schedule zb = make_schedule(request("zb-h1", 3, 5));
  const std::string csv = write("file_scheme.csv", schedule_to_torch_csv(zb));
  const Schedule s = make_schedule(request("file:" + csv, 3, 5));
  EXPECT_EQ(s.ops, zb.ops);
  EXPECT_EQ(s.scheme, "torch-csv");
  std::remove(json.c_str());
  std::remove(csv.c_str());
}

TEST(ScheduleFile, TheRunMustMatchTheFile) {
  const std::string json =
      write("file_scheme_halving.json",
            schedule_to_json(make_schedule(request("chimera", 4, 8, "halving"))));
  EXPECT_NO_THROW((void)make_schedule(request("file:" + json, 4, 8)));  // N counts whole ones
  EXPECT_NE(input_error(request("file:" + json, 8, 8)).find("has D = 4 workers, the run has D = 8"),
            std::string::npos);
  EXPECT_NE(input_error(request("file:" + json, 4, 16))
                .find("has N = 8 micro-batches, the run has N = 16"),
            std::string::npos);
  EXPECT_NE(input_error(request("file:" + json, 4, 8, "doubling"))
                .find("parallel.variant (--variant) = doubling applies to chimera only"),
            std::string::npos);
  EXPECT_NE(input_error(request("file:" + json, 4, 8, "", 0, 2))
                .find("parallel.virtual (--virtual) = 2 applies"),
            std::string::npos);
  std::remove(json.c_str());
  EXPECT_NE(input_error(request("file:" + json, 4, 8)).find("cannot be read"), std::string::npos);
  EXPECT_NE(input_error(request("file:", 4, 8)).find("names no file"), std::string::npos);
  // Verified before use: a deadlocking file is refused.
  const std::string bad = write("file_scheme_bad.csv", "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  EXPECT_NE(input_error(request("file:" + bad, 2, 2)).find("deadlock"), std::string::npos);
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace chimera::schedule
