#include "chimera/schedule/torch_csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <vector>

#include "chimera/core/error.hpp"

namespace chimera::schedule {

namespace {

// Bounds that keep a hostile file from allocating much before the verifier sees it; they are
// above what make_schedule accepts (D <= 4096, N <= 2^20).
constexpr int kMaxRanks = 4096;
constexpr std::int64_t kMaxStage = std::int64_t{1} << 16;
constexpr std::int64_t kMaxMicroBatch = std::int64_t{1} << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Leading decimal digits of `s` as a number below `limit`; nullopt if there are none.
std::optional<std::int64_t> take_number(std::string_view& s, std::int64_t limit,
                                        const std::string& where, const char* what) {
  std::size_t n = 0;
  std::int64_t value = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) {
    value = value * 10 + (s[n] - '0');
    if (value >= limit) {
      throw InputError(
          fmt::format("torch CSV {}: {} index is too large (at most {})", where, what, limit - 1));
    }
    ++n;
  }
  if (n == 0) return std::nullopt;
  s.remove_prefix(n);
  return value;
}

struct Action {
  OpKind kind = OpKind::F;
  int stage = 0;
  int mb = 0;
};

// PyTorch's other action types: communication and resharding, which only its lowered
// ("compute_comms") format carries.
bool is_torch_non_compute(std::string_view type) {
  for (std::string_view t :
       {"UNSHARD", "RESHARD", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD"}) {
    if (type.starts_with(t)) return true;
  }
  return false;
}

Action parse_action(std::string_view text, const std::string& where) {
  const std::string shown(text);
  std::string_view s = text;
  const auto stage = take_number(s, kMaxStage, where, "stage");
  if (!stage) {
    throw InputError(fmt::format(
        "torch CSV {}: '{}' is not an action: expected stage, F/B/I/W, micro-batch (e.g. 0F1)",
        where, shown));
  }
  if (is_torch_non_compute(s)) {
    throw InputError(
        fmt::format("torch CSV {}: '{}' is a communication or resharding action; only the "
                    "compute-only format (F, B, I, W) can be read",
                    where, shown));
  }
  if (s.empty() || std::string_view("FBIW").find(s.front()) == std::string_view::npos) {
    throw InputError(fmt::format(
        "torch CSV {}: '{}' has an unknown computation type: use F, B, I or W", where, shown));
  }
  const char letter = s.front();
  s.remove_prefix(1);
  const auto mb = take_number(s, kMaxMicroBatch, where, "micro-batch");
  if (!mb || !s.empty()) {
    throw InputError(fmt::format(
        "torch CSV {}: '{}' is not an action: expected stage, F/B/I/W, micro-batch (e.g. 0F1)",
        where, shown));
  }
  const OpKind kind = letter == 'F'   ? OpKind::F
                      : letter == 'B' ? OpKind::B
                      : letter == 'I' ? OpKind::I
                                      : OpKind::W;
  return {kind, static_cast<int>(*stage), static_cast<int>(*mb)};
}

// One cell: empty (an idle step), an action, or "(a;b;...)OVERLAP_F_B".
void parse_cell(std::string_view cell, const std::string& where, std::vector<Action>& out) {
  cell = trim(cell);
  if (cell.empty()) return;
  if (cell.front() == '(') {
    const std::size_t close = cell.find(')');
    if (close == std::string_view::npos || trim(cell.substr(close + 1)) != "OVERLAP_F_B") {
      throw InputError(fmt::format(
          "torch CSV {}: '{}' is not an action: expected (a;b;...)OVERLAP_F_B", where, cell));
    }
    std::string_view inner = cell.substr(1, close - 1);
    while (!inner.empty()) {
      const std::size_t semi = inner.find(';');
      const std::string_view part = trim(inner.substr(0, semi));
      if (!part.empty()) out.push_back(parse_action(part, where));
      if (semi == std::string_view::npos) break;
      inner.remove_prefix(semi + 1);
    }
    return;
  }
  out.push_back(parse_action(cell, where));
}

}  // namespace

std::string schedule_to_torch_csv(const Schedule& s) {
  const auto refuse = [&](const std::string& why) {
    throw InputError(fmt::format("cannot write the {} schedule as a torch CSV: {}",
                                 s.scheme.empty() ? "unnamed" : s.scheme, why));
  };
  for (int st = 0; st < s.stages; ++st) {
    for (int p = 1; p < s.pipes(); ++p) {
      if (s.placement[p][st] != s.placement[0][st]) {
        refuse(fmt::format(
            "stage {} is on worker {} and worker {}; the format puts each stage on one rank "
            "(PyTorch rejects a stage on two ranks)",
            st, s.placement[0][st], s.placement[p][st]));
      }
    }
  }
  if (s.pipes() != 1) refuse(fmt::format("it has {} pipes; the format has one", s.pipes()));
  if (s.mb_split != 1) {
    refuse(fmt::format("its micro-batches are split in {} (mb_split); the format has whole ones",
                       s.mb_split));
  }
  std::string out;
  for (const auto& ops : s.ops) {
    bool first = true;
    for (const Op& op : ops) {
      for (int m : op.mbs) {
        if (!first) out += ',';
        first = false;
        out += fmt::format("{}{}{}", op.stage, op_letter(op.kind), m);
      }
    }
    out += "\r\n";
  }
  return out;
}

Schedule schedule_from_torch_csv(std::string_view text) {
  std::vector<std::string_view> rows;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view row = text.substr(0, end);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    rows.push_back(row);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  // An empty line, trailing or not, is a rank with no actions: PyTorch's _load_csv reads it so
  // (csv.reader yields [] for it), and a file PyTorch runs on R ranks must mean R ranks here too.
  if (rows.empty()) throw InputError("torch CSV: the file has no rows (one row per rank)");
  if (static_cast<int>(rows.size()) > kMaxRanks) {
    throw InputError(fmt::format("torch CSV: {} rows; at most {} ranks", rows.size(), kMaxRanks));
  }

  Schedule s;
  s.scheme = "torch-csv";
  s.workers = static_cast<int>(rows.size());
  s.ops.resize(rows.size());
  std::vector<int> rank_of;  // [stage] -> the row that names it; -1 while none has
  bool backward = false;
  for (int r = 0; r < s.workers; ++r) {
    std::string_view row = rows[static_cast<std::size_t>(r)];
    for (int c = 0;; ++c) {
      const std::size_t comma = row.find(',');
      const std::string where = fmt::format("row {} cell {}", r, c);
      std::vector<Action> actions;
      parse_cell(row.substr(0, comma), where, actions);
      for (const Action& a : actions) {
        if (a.stage >= static_cast<int>(rank_of.size())) {
          rank_of.resize(static_cast<std::size_t>(a.stage) + 1, -1);
        }
        int& rank = rank_of[static_cast<std::size_t>(a.stage)];
        if (rank >= 0 && rank != r) {
          throw InputError(fmt::format(
              "torch CSV {}: stage {} is on rank {} and rank {}; the format puts each stage on "
              "one rank",
              where, a.stage, rank, r));
        }
        rank = r;
        s.schedule_micro_batches = std::max(s.schedule_micro_batches, a.mb + 1);
        backward = backward || a.kind != OpKind::F;
        s.ops[static_cast<std::size_t>(r)].push_back(Op{a.kind, 0, a.stage, {a.mb}});
      }
      if (comma == std::string_view::npos) break;
      row.remove_prefix(comma + 1);
    }
  }
  s.stages = static_cast<int>(rank_of.size());
  if (s.stages == 0) throw InputError("torch CSV: no row has an action");
  for (int st = 0; st < s.stages; ++st) {
    if (rank_of[static_cast<std::size_t>(st)] < 0) {
      throw InputError(fmt::format(
          "torch CSV: stage {} is on no rank (stages 0..{} are named; every stage needs a rank)",
          st, s.stages - 1));
    }
  }
  s.placement = {rank_of};
  s.pipe_of.assign(static_cast<std::size_t>(s.schedule_micro_batches), 0);
  s.forward_only = !backward;
  return s;
}

}  // namespace chimera::schedule
