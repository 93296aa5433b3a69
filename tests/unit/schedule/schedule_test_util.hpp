#pragma once
// Helpers shared by the schedule tests.
#include <sstream>
#include <string>
#include <vector>

#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"

namespace chimera::schedule::testing {

// The cells of the grid rows ("P0 F0d0 . F1d0 ..." -> {"F0d0", ".", "F1d0", ...}), one vector per
// worker; the summary lines after the grid are ignored.
inline std::vector<std::vector<std::string>> grid_cells(const std::string& grid) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(grid);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() < 2 || line[0] != 'P' || line[1] < '0' || line[1] > '9') continue;
    std::istringstream words(line);
    std::string word;
    words >> word;  // the worker name
    std::vector<std::string> cells;
    while (words >> word) cells.push_back(word);
    rows.push_back(cells);
  }
  return rows;
}

inline Costs unit_costs() {
  return Costs::forward_backward(1, 1);
}

// F = I = W = 1 per micro-batch through 1/D of the model: a V op (half of that) costs 1/2.
inline Costs unit_split() {
  Costs c = Costs::forward_backward(1, 2);
  c.I = 1;
  c.W = 1;
  return c;
}

inline ScheduleRequest request(std::string scheme, int D, int N, std::string variant = "",
                               int pipes = 0, int virtual_stages = 0) {
  return {std::move(scheme), D, N, std::move(variant), pipes, virtual_stages};
}

}  // namespace chimera::schedule::testing
