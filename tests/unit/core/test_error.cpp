#include <gtest/gtest.h>

#include "chimera/core/error.hpp"

namespace chimera {

TEST(Error, CheckCarriesFileLineAndExpression) {
  try {
    const int stages = 3;
    CHIMERA_CHECK(stages % 2 == 0, "stages={} must be even", stages);
    FAIL() << "CHIMERA_CHECK did not throw";
  } catch (const InputError&) {
    FAIL() << "a broken invariant must not look like bad input";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("test_error.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stages % 2 == 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stages=3 must be even"), std::string::npos) << msg;
    EXPECT_EQ(exit_status(e), 1);
  }
}

TEST(Error, RequireIsInputErrorWithStatusTwo) {
  try {
    CHIMERA_REQUIRE(false, "N={} must be a multiple of D={}", 6, 4);
    FAIL() << "CHIMERA_REQUIRE did not throw";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "N=6 must be a multiple of D=4");
    EXPECT_EQ(exit_status(e), 2);
  }
}

TEST(Error, DivergedTrainingHasStatusThree) {
  const DivergedError diverged("step 7: the loss is nan");
  EXPECT_EQ(exit_status(diverged), kExitDiverged);
  EXPECT_EQ(kExitDiverged, 3);
  EXPECT_EQ(exit_status(InputError("x")), kExitInput);
  EXPECT_EQ(exit_status(Error("x")), kExitInternal);
}

TEST(Error, RankPrefixAppearsOnceSet) {
  set_process_rank(7);
  EXPECT_EQ(rank_prefix(), "[rank 7] ");
  try {
    CHIMERA_CHECK(false, "x");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[rank 7] ", 0), 0U) << e.what();
  }
  set_process_rank(-1);
  EXPECT_EQ(rank_prefix(), "");
}

}  // namespace chimera
