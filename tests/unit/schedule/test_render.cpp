// The renderers: grid columns follow the costs, CSV has a row per worker, SVG is complete, the
// comparison covers every scheme.
#include <gtest/gtest.h>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/render.hpp"
#include "schedule_test_util.hpp"

namespace chimera::schedule {
namespace {

using testing::grid_cells;
using testing::request;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Render, GridColumnsFollowTheCosts) {
  const Schedule s = make_schedule(request("1f1b", 2, 2));
  const Costs c = Costs::forward_backward(1, 2);
  const auto rows = grid_cells(render_grid(s, simulate(s, c), c));
  // Stage 1 runs F0 B0 F1 B1 from slot 1, each B two columns wide; stage 0's F1 enters just in
  // time for stage 1 (slot 3), its backwards follow stage 1's. Makespan 9.
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"F0d0", ".", ".", "F1d0", "B0d0", "----", ".",
                                               "B1d0", "----"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{".", "F0d1", "B0d1", "----", "F1d1", "B1d1", "----",
                                               ".", "."}));
}

TEST(Render, GridStaysPrintableForFarApartCosts) {
  const Schedule s = make_schedule(request("1f1b", 2, 2));
  const Costs c = Costs::forward_backward(1e-3, 1e6);
  const auto rows = grid_cells(render_grid(s, simulate(s, c), c));
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_LE(rows[0].size(), 4096U);
  EXPECT_GE(rows[0].size(), 4000U);
}

TEST(Render, GridShowsInjectionsJustInTime) {
  // The simulator starts F1d0 right after F0d0; the grid draws it where the paper does.
  const Schedule s = make_schedule(request("chimera", 4, 4));
  const Costs c = Costs::forward_backward(1, 1);
  const SimResult r = simulate(s, c);
  ASSERT_EQ(s.ops[0][1], (Op{OpKind::F, 0, 0, {1}}));
  EXPECT_DOUBLE_EQ(r.timeline[0][1].start, 1);
  EXPECT_DOUBLE_EQ(display_timeline(s, r, c)[0][1].start, 2);
  // Nothing else moves.
  const auto shown = display_timeline(s, r, c);
  for (int w = 0; w < 4; ++w) {
    for (std::size_t k = 0; k < shown[w].size(); ++k) {
      const bool entering = s.ops[w][k].kind == OpKind::F && s.ops[w][k].stage == 0;
      if (!entering) {
        EXPECT_DOUBLE_EQ(shown[w][k].start, r.timeline[w][k].start);
      }
    }
  }
}

TEST(Render, CsvHasOneRowPerWorker) {
  const Schedule s = make_schedule(request("chimera", 4, 4));
  const std::string csv = render_csv(s, simulate(s, Costs::forward_backward(1, 1)));
  EXPECT_EQ(csv.rfind("worker,stages,ops,busy,idle,peak_activations,weight_copies,order\n", 0), 0U);
  EXPECT_EQ(count(csv, "\n"), 5U);
  EXPECT_NE(csv.find("\n0,0 3,8,8,2,3,2,F0d0 F1d0 F2u3 B2u3 F3u3 B3u3 B0d0 B1d0\n"),
            std::string::npos)
      << csv;
}

TEST(Render, SvgDrawsEveryOpAndAllreduce) {
  const Schedule s = make_schedule(request("chimera", 4, 4));
  Costs c = Costs::forward_backward(1, 2);
  c.beta = 1;
  c.stage_grad_bytes = 1;
  const std::string svg = render_svg(s, simulate(s, c), c);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0U);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>F"), 16U);
  EXPECT_EQ(count(svg, "<title>B"), 16U);
  EXPECT_EQ(count(svg, "<title>allreduce stage"), 8U);  // 4 stages x 2 holders
}

TEST(Render, ComparisonCoversEverySchemeAndSaysWhyNot) {
  const std::string table = render_comparison(4, 8, 2);
  for (const char* row :
       {"gpipe", "1f1b", "gems", "interleaved v=2", "zb-h1", "zb-v", "dualpipev", "chimera direct",
        "chimera doubling", "chimera halving", "chimera direct, 4 pipes", "bitpipe", "bitpipe-zb",
        "chimera-zb", "v-half", "v-min"}) {
    EXPECT_NE(table.find(std::string("\n") + row + " "), std::string::npos) << row;
  }
  // The last column: the largest peak in chunk-activations, 2D for 1F1B, 6 and 4 for the V's.
  for (const auto& [row, chunks] : std::vector<std::pair<std::string, std::string>>{
           {"1f1b", "8"}, {"v-half", "6"}, {"v-min", "4"}}) {
    const std::size_t at = table.find("\n" + row + " ");
    ASSERT_NE(at, std::string::npos) << row;
    const std::string line = table.substr(at + 1, table.find('\n', at + 1) - at - 1);
    EXPECT_TRUE(line.ends_with(" " + chunks)) << line;
  }
  const std::string odd = render_comparison(5, 10, 2);
  EXPECT_NE(odd.find("chimera direct             n/a: chimera needs an even D"), std::string::npos)
      << odd;
  const std::string short_batch = render_comparison(4, 4, 2);
  EXPECT_NE(short_batch.find("dualpipev                  n/a: dualpipev needs N >= 2D"),
            std::string::npos)
      << short_batch;
  EXPECT_NE(odd.find("bitpipe                    n/a: bitpipe needs an even D"), std::string::npos)
      << odd;
}

}  // namespace
}  // namespace chimera::schedule
