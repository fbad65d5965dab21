#include "cluster/hostfile.h"

#include <charconv>
#include <cstring>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_read.h"
#include "base/regular_file.h"

namespace tpusim::cluster {
namespace {

int ParseCount(const std::string& value, const std::string& where) {
  int n = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || ptr != end || n < 1) Fail("{}: '{}' is not a slot count >= 1", where, value);
  return n;
}

std::string Range(int first, int count) {
  return count == 1 ? std::to_string(first) : fmt::format("{}-{}", first, first + count - 1);
}

}  // namespace

std::vector<HostfileNode> ParseHostfile(const std::string& text, const std::string& path) {
  std::vector<HostfileNode> nodes;
  std::map<std::string, size_t> index;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const std::string where = fmt::format("hostfile {} line {}", path, number);
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string name;
    if (!(words >> name)) continue;
    int slots = 1;
    for (std::string word; words >> word;) {
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots")) {
        Fail("{}: '{}' is not slots=N or max_slots=N", where, word);
      }
      const int n = ParseCount(word.substr(eq + 1), where);
      if (key == "slots") slots = n;
    }
    auto [it, added] = index.emplace(name, nodes.size());
    if (added) nodes.push_back({name, 0});
    nodes[it->second].slots += slots;
  }
  if (nodes.empty()) Fail("hostfile {} names no node", path);
  return nodes;
}

std::vector<HostfileNode> ReadHostfile(const std::string& path) {
  RefuseNonRegularFile(path);
  const FileContents text = ReadWholeFile(path);
  if (!text.ok()) Fail("hostfile {}: cannot read it ({})", path, std::strerror(text.error));
  return ParseHostfile(text.bytes, path);
}

std::vector<NodePlacement> PlaceTpuHosts(const std::vector<HostfileNode>& nodes, int num_tpu_hosts,
                                         int ranks_per_tpu_host, const std::string& source) {
  std::vector<NodePlacement> placement;
  int host = 0, slots = 0;
  for (const HostfileNode& n : nodes) {
    const int fits = n.slots / ranks_per_tpu_host;
    slots += n.slots;
    const int take = std::min(fits, num_tpu_hosts - host);
    if (take <= 0) continue;
    placement.push_back({n.name, host, take, host * ranks_per_tpu_host, take * ranks_per_tpu_host});
    host += take;
  }
  if (host < num_tpu_hosts) {
    Fail(
        "{}: {} slots on {} nodes hold {} TPU hosts of {} ranks each (a TPU host's ranks "
        "stay on one node); the slice needs {} ({} ranks)",
        source, slots, nodes.size(), WholeTpuHostCapacity(nodes, ranks_per_tpu_host), ranks_per_tpu_host, num_tpu_hosts,
        num_tpu_hosts * ranks_per_tpu_host);
  }
  return placement;
}

std::vector<NodePlacement> PlaceBySlot(const std::vector<HostfileNode>& nodes, int num_tpu_hosts,
                                       int ranks_per_tpu_host) {
  std::vector<NodePlacement> placement;
  const int num_ranks = num_tpu_hosts * ranks_per_tpu_host;
  for (int rank = 0; const HostfileNode& n : nodes) {
    const int take = std::min(n.slots, num_ranks - rank);
    if (take <= 0) break;
    const int first_host = rank / ranks_per_tpu_host, last_host = (rank + take - 1) / ranks_per_tpu_host;
    placement.push_back({n.name, first_host, last_host - first_host + 1, rank, take});
    rank += take;
  }
  return placement;
}

int WholeTpuHostCapacity(const std::vector<HostfileNode>& nodes, int ranks_per_tpu_host) {
  int capacity = 0;
  for (const HostfileNode& n : nodes) capacity += n.slots / ranks_per_tpu_host;
  return capacity;
}

std::vector<std::string> DescribeSplitTpuHosts(const std::vector<NodePlacement>& placement, int ranks_per_tpu_host) {
  std::map<int, std::vector<std::string>> nodes_of_host;
  for (const NodePlacement& p : placement) {
    for (int host = p.first_tpu_host; host < p.first_tpu_host + p.num_tpu_hosts; ++host) {
      nodes_of_host[host].push_back(p.node);
    }
  }
  std::vector<std::string> lines;
  for (const auto& [host, nodes] : nodes_of_host) {
    if (nodes.size() < 2) continue;
    std::string names;
    for (const std::string& name : nodes) names += (names.empty() ? "" : ", ") + name;
    lines.push_back(fmt::format("TPU host {} (ranks {}) is split over nodes {}", host,
                                Range(host * ranks_per_tpu_host, ranks_per_tpu_host), names));
  }
  return lines;
}

std::string PlacementHostfile(const std::vector<NodePlacement>& placement) {
  std::string out;
  for (const NodePlacement& p : placement) out += fmt::format("{} slots={}\n", p.node, p.num_ranks);
  return out;
}

std::string PlacementHostList(const std::vector<NodePlacement>& placement) {
  std::string out;
  for (const NodePlacement& p : placement) {
    out += fmt::format("{}{}:{}", out.empty() ? "" : ",", p.node, p.num_ranks);
  }
  return out;
}

std::string PlacementRankNodes(const std::vector<NodePlacement>& placement) {
  std::string out;
  for (const NodePlacement& p : placement) {
    for (int rank = 0; rank < p.num_ranks; ++rank) out += (out.empty() ? "" : ",") + p.node;
  }
  return out;
}

std::vector<std::string> DescribePlacement(const std::vector<NodePlacement>& placement) {
  std::vector<std::string> lines;
  for (const NodePlacement& p : placement) {
    lines.push_back(fmt::format("node {}: TPU host{} {} (ranks {})", p.node, p.num_tpu_hosts == 1 ? "" : "s",
                                Range(p.first_tpu_host, p.num_tpu_hosts), Range(p.first_rank, p.num_ranks)));
  }
  return lines;
}

}  // namespace tpusim::cluster
