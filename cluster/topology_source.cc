#include "cluster/topology_source.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/file_read.h"
#include "base/regular_file.h"
#include "base/strict_yaml.h"
#include "cluster/accelerator_type.h"
#include "cluster/topology_import.h"
#include "source_dir.h"

namespace tpusim::cluster {
namespace {

namespace fs = std::filesystem;

// A full v5p pod's device list is under 1 MiB; anything past this is not a topology.
constexpr uintmax_t kMaxFileBytes = uintmax_t{64} << 20;

std::vector<std::string> TopologySearchDirs(const std::vector<std::string>& search_dirs) {
  std::vector<std::string> dirs = search_dirs;
  if (const char* config_dir = std::getenv("TPUSIM_CONFIG_DIR"); config_dir && *config_dir) {
    dirs.push_back((fs::path(config_dir) / "topologies").string());
  }
  dirs.push_back(TPUSIM_SOURCE_DIR "/configs/topologies");
  return dirs;
}

bool IsRegularFile(const fs::path& path) {
  std::error_code ignored;
  return fs::is_regular_file(path, ignored);
}

// Names (file stems) of the *.yaml files in `dirs`, sorted and without repeats.
std::set<std::string> AvailableTopologies(const std::vector<std::string>& dirs) {
  std::set<std::string> names;
  for (const auto& dir : dirs) {
    std::error_code error;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
      if (it->path().extension() == ".yaml" && IsRegularFile(it->path())) {
        names.insert(it->path().stem().string());
      }
    }
  }
  return names;
}

std::string FindInDirs(const std::string& name, const std::vector<std::string>& dirs) {
  const bool has_suffix = fs::path(name).extension() == ".yaml";
  const std::string file_name = has_suffix ? name : name + ".yaml";
  for (const auto& dir : dirs) {
    const fs::path candidate = fs::path(dir) / file_name;
    if (IsRegularFile(candidate)) return candidate.string();
  }
  return "";
}

std::string ReadBoundedFile(const std::string& path) {
  RefuseNonRegularFile(path);
  if (!IsRegularFile(path)) Fail("{}: topology file not found", path);
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error) Fail("{}: cannot read the topology file: {}", path, error.message());
  if (size > kMaxFileBytes) {
    Fail("{}: {} bytes, larger than {} MiB; not a topology file", path, size, kMaxFileBytes >> 20);
  }
  FileContents read = ReadWholeFile(path, static_cast<size_t>(size));
  if (!read.ok() || read.bytes.size() != size) Fail("{}: cannot read the topology file", path);
  return std::move(read.bytes);
}

std::string FormatYamlError(const std::string& source, const YAML::Exception& e) {
  if (e.mark.is_null()) return fmt::format("{}: malformed YAML: {}", source, e.msg);
  return fmt::format("{}:{}:{}: malformed YAML: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg);
}

// Duplicate keys, non-scalar keys and alias bombs are errors (base/strict_yaml.h).
YamlNode ParseYaml(const std::string& text, const std::string& path) { return LoadStrictYaml(text, path); }

// `N x NAME` split at its first 'x': a signed count of at most 9 digits, then a
// non-empty NAME (blanks around the 'x' allowed). nullopt for anything else.
struct MultisliceReference {
  int64_t count = 0;
  std::string slice;
};

std::optional<MultisliceReference> SplitMultislice(const std::string& reference) {
  size_t at = reference.find_first_not_of(' ');
  if (at == std::string::npos) return std::nullopt;
  const bool negative = reference[at] == '-';
  if (negative) ++at;
  const size_t digits = reference.find_first_not_of("0123456789", at);
  if (digits == at || digits == std::string::npos || digits - at > 9) return std::nullopt;
  const int64_t count = std::stoll(reference.substr(at, digits - at));
  const size_t x = reference.find_first_not_of(' ', digits);
  if (x == std::string::npos || reference[x] != 'x') return std::nullopt;
  const size_t name = reference.find_first_not_of(' ', x + 1);
  if (name == std::string::npos) return std::nullopt;
  return MultisliceReference{negative ? -count : count, reference.substr(name)};
}

}  // namespace

TopologySource ResolveTopology(const std::string& reference, const std::vector<std::string>& search_dirs,
                               const std::string& generation) {
  RefuseSpecialFile(reference);  // a name or a folder still falls through below
  if (IsRegularFile(reference)) return {reference, "", generation, 1, ""};
  const std::vector<std::string> dirs = TopologySearchDirs(search_dirs);
  if (std::string path = FindInDirs(reference, dirs); !path.empty()) return {path, "", generation, 1, ""};
  if (const std::optional<MultisliceReference> multi = SplitMultislice(reference)) {
    if (multi->count < 1 || multi->count > kMaxSlices) {
      Fail("topology '{}': {} slices: the slice count must be a whole number in [1, {}]", reference, multi->count,
           kMaxSlices);
    }
    TopologySource slice = InContext(fmt::format("topology '{}'", reference),
                                     [&] { return ResolveTopology(multi->slice, search_dirs, generation); });
    if (slice.num_slices != 1) Fail("topology '{}': '{}' is already several slices", reference, multi->slice);
    slice.num_slices = static_cast<int>(multi->count);
    slice.name = reference;
    return slice;
  }
  if (AcceleratorTypeShape(reference)) return {"", reference, generation, 1, ""};
  // One line of about 300 characters however many files the folders hold.
  const std::set<std::string> names = AvailableTopologies(dirs);
  constexpr size_t kNamesShown = 10;
  std::vector<std::string> shown(names.begin(), std::next(names.begin(), std::min(names.size(), kNamesShown)));
  if (names.size() > kNamesShown) shown.push_back(fmt::format("and {} more", names.size() - kNamesShown));
  Fail("topology '{}' is neither a file, a name in {} ({}) nor an accelerator type ({})", reference,
       fmt::join(dirs, ", "), fmt::join(shown, ", "), AcceleratorTypePatterns());
}

Topology LoadTopology(const TopologySource& source) {
  Topology slice = source.accelerator_type.empty() ? LoadTopologyFile(source.path, source.generation)
                                                   : GenerateAcceleratorType(source.accelerator_type);
  if (source.name.empty()) return slice;
  if (slice.num_slices() != 1) {
    Fail("topology '{}': {} is already {} slices", source.name, slice.name(), slice.num_slices());
  }
  return slice.WithSlices("topology '" + source.name + "'", source.num_slices, source.name);
}

Topology LoadTopologyFile(const std::string& path, const std::string& generation) {
  const std::string bytes = ReadBoundedFile(path);
  const std::string name = fs::path(path).stem().string();
  switch (DetectTopologyFormat(bytes, path)) {
    case TopologyFileFormat::kJaxDevices:
      return ImportJaxDevices(bytes, path, name, generation);
    case TopologyFileFormat::kTopologyProto:
      return ImportTopologyProto(bytes, path, name, generation);
    case TopologyFileFormat::kYaml:
      break;
  }
  try {
    return ParseTopology(ParseYaml(bytes, path), path);
  } catch (const YAML::Exception& e) {
    throw Error(FormatYamlError(path, e));
  }
}

std::vector<MeshDevice> LoadDeviceOrder(const std::string& path) {
  const std::string bytes = ReadBoundedFile(path);
  if (DetectTopologyFormat(bytes, path) != TopologyFileFormat::kJaxDevices) {
    Fail("{}: not a JAX device list (a JSON array of devices, or what print(jax.devices()) prints)", path);
  }
  return ReadJaxDeviceOrder(bytes, path);
}

bool IsTopologyFile(const std::string& path, YamlNode* yaml) {
  const std::string bytes = ReadBoundedFile(path);
  if (bytes.find_first_not_of(" \t\r\n") == std::string::npos) {
    // An empty .yaml is a run file of defaults; an empty devices.json or .pb is a
    // broken topology (LoadTopologyFile says so).
    const fs::path extension = fs::path(path).extension();
    if (yaml) *yaml = YamlNode();
    return extension != ".yaml" && extension != ".yml";
  }
  if (DetectTopologyFormat(bytes, path) != TopologyFileFormat::kYaml) return true;
  const YamlNode node = ParseYaml(bytes, path);
  const bool topology = node.IsMap() && (node["mesh_shape"] || node["generation"]);
  if (!topology && yaml) *yaml = node;
  return topology;
}

}  // namespace tpusim::cluster
