#include "cluster/slurm_allocation.h"

#include <charconv>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>

#include "base/error.h"

namespace tpusim::cluster {
namespace {

// More hosts than any cluster has: a typo such as [1-99999999] is refused, not expanded.
constexpr size_t kMaxHosts = 1'000'000;

// `text` as a whole number of at most 18 digits, or nullopt.
std::optional<uint64_t> Number(const std::string& text) {
  uint64_t n = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || text.size() > 18 || ec != std::errc() || ptr != end) return std::nullopt;
  return n;
}

// Splits at commas outside brackets: "a[1,2],b" -> "a[1,2]" "b".
std::vector<std::string> SplitTopLevel(const std::string& text) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : text) {
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (c == ',' && depth == 0) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

// One bracket group's numbers as text, each range padded to its first bound's width.
std::vector<std::string> ExpandRanges(const std::string& group, const std::string& where) {
  std::vector<std::string> out;
  for (const std::string& range : SplitTopLevel(group)) {
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    const std::optional<uint64_t> first = Number(lo), last = Number(hi);
    if (!first || !last || *first > *last) {
      Fail("{}: '{}' in [{}] is not a number or a range N-M with N <= M", where, range, group);
    }
    if (*last - *first >= kMaxHosts - out.size()) Fail("{}: more than {} hosts", where, kMaxHosts);
    for (uint64_t n = *first; n <= *last; ++n) out.push_back(fmt::format("{:0{}}", n, lo.size()));
  }
  return out;
}

// One name of the list with its bracket groups multiplied out.
std::vector<std::string> ExpandName(const std::string& item, const std::string& where) {
  if (item.empty()) Fail("{}: an empty host name", where);
  std::vector<std::string> names{""};
  for (size_t at = 0; at < item.size();) {
    const size_t open = item.find('[', at);
    const std::string literal = item.substr(at, open == std::string::npos ? std::string::npos : open - at);
    if (literal.find(']') != std::string::npos) Fail("{}: ']' without '[' in '{}'", where, item);
    for (std::string& name : names) name += literal;
    if (open == std::string::npos) break;
    const size_t close = item.find(']', open);
    if (close == std::string::npos) Fail("{}: '[' without ']' in '{}'", where, item);
    const std::vector<std::string> numbers = ExpandRanges(item.substr(open + 1, close - open - 1), where);
    if (numbers.size() > kMaxHosts / names.size()) Fail("{}: more than {} hosts", where, kMaxHosts);
    std::vector<std::string> product;
    for (const std::string& name : names) {
      for (const std::string& number : numbers) product.push_back(name + number);
    }
    names = std::move(product);
    at = close + 1;
  }
  return names;
}

// Each node's tasks: SLURM_TASKS_PER_NODE, else SLURM_NTASKS spread as Slurm's
// block distribution does (the first nodes take one more).
std::vector<int> TasksOnNodes(const EnvLookup& env, const std::string& job, size_t num_nodes) {
  if (const std::optional<std::string> per_node = env("SLURM_TASKS_PER_NODE"); per_node && !per_node->empty()) {
    std::vector<int> tasks = ParseTasksPerNode(*per_node, "SLURM_TASKS_PER_NODE");
    if (tasks.size() != num_nodes) {
      Fail("SLURM_TASKS_PER_NODE '{}' counts tasks on {} nodes but SLURM_JOB_NODELIST names {}", *per_node,
           tasks.size(), num_nodes);
    }
    return tasks;
  }
  const std::optional<std::string> ntasks = env("SLURM_NTASKS");
  if (!ntasks) {
    Fail(
        "SLURM_JOB_ID={} is set but neither SLURM_TASKS_PER_NODE nor SLURM_NTASKS: tpusim "
        "cannot tell how many tasks the allocation has",
        job);
  }
  const std::optional<uint64_t> n = Number(*ntasks);
  if (!n || *n < 1 || *n > kMaxHosts * 1024) {
    Fail("SLURM_NTASKS '{}' is not a task count >= 1", *ntasks);
  }
  std::vector<int> tasks(num_nodes, static_cast<int>(*n / num_nodes));
  for (size_t i = 0; i < *n % num_nodes; ++i) ++tasks[i];
  return tasks;
}

}  // namespace

std::vector<std::string> ExpandHostlist(const std::string& hostlist, const std::string& what) {
  const std::string where = fmt::format("{} '{}'", what, hostlist);
  std::vector<std::string> hosts;
  for (const std::string& item : SplitTopLevel(hostlist)) {
    const std::vector<std::string> names = ExpandName(item, where);
    if (names.size() > kMaxHosts - hosts.size()) Fail("{}: more than {} hosts", where, kMaxHosts);
    hosts.insert(hosts.end(), names.begin(), names.end());
  }
  return hosts;
}

std::vector<int> ParseTasksPerNode(const std::string& text, const std::string& what) {
  std::vector<int> tasks;
  for (const std::string& entry : SplitTopLevel(text)) {
    const size_t paren = entry.find("(x");
    const std::optional<uint64_t> count = Number(entry.substr(0, paren));
    std::optional<uint64_t> repeat = 1;
    if (paren != std::string::npos) {
      repeat = entry.back() == ')' ? Number(entry.substr(paren + 2, entry.size() - paren - 3)) : std::nullopt;
    }
    if (!count || !repeat || *count < 1 || *count > (1 << 20) || *repeat < 1 || *repeat > kMaxHosts - tasks.size()) {
      Fail("{} '{}': '{}' is not N or N(xM) with N, M >= 1", what, text, entry);
    }
    tasks.insert(tasks.end(), *repeat, static_cast<int>(*count));
  }
  return tasks;
}

int SlurmAllocation::num_tasks() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0,
                         [](int sum, const HostfileNode& node) { return sum + node.slots; });
}

std::optional<SlurmAllocation> ReadSlurmAllocation(const EnvLookup& env) {
  const std::optional<std::string> job = env("SLURM_JOB_ID");
  if (!job) return std::nullopt;
  std::optional<std::string> nodelist = env("SLURM_JOB_NODELIST");
  if (!nodelist || nodelist->empty()) nodelist = env("SLURM_NODELIST");
  if (!nodelist || nodelist->empty()) {
    Fail(
        "SLURM_JOB_ID={} is set (a Slurm allocation) but SLURM_JOB_NODELIST is not: tpusim "
        "cannot tell the allocation's nodes; run it inside salloc or sbatch, or unset "
        "SLURM_JOB_ID",
        *job);
  }
  const std::vector<std::string> names = ExpandHostlist(*nodelist, "SLURM_JOB_NODELIST");
  const std::vector<int> tasks = TasksOnNodes(env, *job, names.size());
  SlurmAllocation allocation{*job, *nodelist, {}};
  for (size_t i = 0; i < names.size(); ++i) allocation.nodes.push_back({names[i], tasks[i]});
  return allocation;
}

}  // namespace tpusim::cluster
