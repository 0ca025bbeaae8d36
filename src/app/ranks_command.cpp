// `hone ranks [parallel.tp=N] [parallel.pp=N] [parallel.cp=N] [parallel.ep=N]`: prints where every rank runs, its place in the rank grid and the
// members of its groups, to check a launch (mpirun/srun options, ranks per node, GPU per local rank, whether each
// tensor-parallel group sits on one node) before a long job.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/command.h"
#include "runtime/error.h"
#include "runtime/mpi_check.h"
#include "runtime/rank_grid.h"
#include "runtime/runtime.h"

namespace hone {
namespace {

const char* const kUsage =
    "usage: [mpirun -np N | srun] hone ranks [parallel.tp=N] [parallel.pp=N] [parallel.cp=N] [parallel.ep=N]\n"
    "  Prints every rank's host, local rank, place in the tp x cp x dp x pp grid and its groups, to check a launch\n"
    "  (ranks per node, GPU per local rank, tensor-parallel groups inside a node) before a long job.\n";

int parse_positive(const std::string& key, const std::string& value) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  HONE_USER_CHECK(used == value.size() && v >= 1, key, " = '", value, "' must be a positive integer");
  return v;
}

// "[0 1]"; a long group by its first seven members, its last and its size: "[0 8 16 24 32 40 48 ... 504] (64 ranks)".
std::string group_text(const std::vector<int>& g) {
  constexpr size_t kShown = 8;
  std::string s = "[";
  for (size_t i = 0; i < g.size(); ++i) {
    if (g.size() > kShown && i == kShown - 1) {
      s += cat(" ... ", g.back(), "] (", g.size(), " ranks)");
      return s;
    }
    s += cat(i ? " " : "", g[i]);
  }
  return s + "]";
}

int run_ranks(const std::vector<std::string>& args) {
  int tp = 1, pp = 1, cp = 1, ep = 1;
  for (const auto& a : args) {
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (key == "parallel.tp") {
      tp = parse_positive(key, value);
    } else if (key == "parallel.pp") {
      pp = parse_positive(key, value);
    } else if (key == "parallel.cp") {
      cp = parse_positive(key, value);
    } else if (key == "parallel.ep") {
      ep = parse_positive(key, value);
    } else {
      throw UserError(cat("hone ranks: unknown argument '", a,
                          "' (allowed: parallel.tp=N parallel.pp=N parallel.cp=N parallel.ep=N)"));
    }
  }
  const RankGrid grid(world_size(), tp, pp, cp, ep);
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  const RankCoord c = grid.coord(world_rank());
  char line[192];
  std::snprintf(line, sizeof(line), "rank %d: host %s, local rank %d of %d, dp %d tp %d pp %d", world_rank(), host,
                local_rank(), local_size(), c.dp, c.tp, c.pp);
  if (cp > 1) std::snprintf(line + std::strlen(line), sizeof(line) - std::strlen(line), " cp %d", c.cp);
  if (ep > 1)
    std::snprintf(line + std::strlen(line), sizeof(line) - std::strlen(line), " ep %d edp %d",
                  grid.ep_rank(world_rank()), grid.edp_rank(world_rank()));
  std::vector<char> lines(world_rank() == 0 ? sizeof(line) * static_cast<size_t>(world_size()) : 1);
  MPI_CHECK(MPI_Gather(line, sizeof(line), MPI_CHAR, lines.data(), sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD));
  if (world_rank() == 0) {
    std::printf("%d ranks: dp %d x tp %d x pp %d", world_size(), grid.dp(), grid.tp(), grid.pp());
    if (cp > 1) std::printf(" x cp %d", cp);
    if (ep > 1) std::printf(", ep %d x expert-data-parallel %d", ep, grid.edp());
    std::printf("\n");
    // The groups follow from the grid alone (no need to gather them): the ranks a tp or dp collective spans.
    for (int r = 0; r < world_size(); ++r) {
      std::string groups = cat(", tp group ", group_text(grid.tp_group(r)), ", dp group ", group_text(grid.dp_group(r)));
      if (grid.pp() > 1) groups += cat(", pp group ", group_text(grid.pp_group(r)));
      if (grid.cp() > 1) groups += cat(", cp group ", group_text(grid.cp_group(r)));
      if (grid.ep() > 1) groups += cat(", ep group ", group_text(grid.group(GridGroup::ep, r)));
      std::printf("%s%s\n", &lines[sizeof(line) * static_cast<size_t>(r)], groups.c_str());
    }
  }
  return kExitOk;
}

const CommandRegistration reg{{"ranks", "print each rank's host, local rank, place in the dp x tp x pp grid and groups",
                               /*uses_mpi=*/true, &run_ranks, kUsage}};

}  // namespace
}  // namespace hone
