#include "checkpoint/manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file_read.h"
#include "base/atomic_file.h"
#include "base/crc32c.h"
#include "base/error.h"

namespace tpusim::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kManifest = "manifest.json";
constexpr int kVersion = 1;

std::string ManifestPath(const std::string& step_dir) { return (fs::path(step_dir) / kManifest).string(); }

// "step-" and one or more digits.
bool IsStepName(const std::string& name) {
  constexpr std::string_view kPrefix = "step-";
  return name.size() > kPrefix.size() && name.starts_with(kPrefix) &&
         std::all_of(name.begin() + kPrefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::byte> ReadFileBytes(const std::string& path) {
  const FileContents read = ReadWholeFile(path);
  if (!read.ok()) Fail("{}: missing or unreadable ({})", path, ErrnoText(read.error));
  const auto* first = reinterpret_cast<const std::byte*>(read.bytes.data());
  return std::vector<std::byte>(first, first + read.bytes.size());
}

namespace {

json ToJson(const Manifest& m) {
  json files = json::array();
  for (const ManifestFile& f : m.files) {
    files.push_back({{"name", f.name}, {"host", f.host}, {"ordinal", f.ordinal}, {"bytes", f.bytes},
                     {"crc32c", f.crc32c}});
  }
  return {{"version", kVersion}, {"global_step", m.global_step}, {"infeed_step", m.infeed_step},
          {"seed", m.seed}, {"fingerprint", m.fingerprint}, {"files", files}};
}

Manifest FromJson(const json& j) {
  if (j.at("version").get<int>() != kVersion) Fail("version {}, this tpusim reads {}", j.at("version").dump(), kVersion);
  Manifest m;
  m.global_step = j.at("global_step").get<int64_t>();
  m.infeed_step = j.at("infeed_step").get<int64_t>();
  m.seed = j.at("seed").get<uint64_t>();
  m.fingerprint = j.at("fingerprint").get<std::map<std::string, std::string>>();
  for (const json& f : j.at("files")) {
    m.files.push_back({f.at("name").get<std::string>(), f.at("host").get<int>(), f.at("ordinal").get<int>(),
                       f.at("bytes").get<int64_t>(), f.at("crc32c").get<uint32_t>()});
  }
  return m;
}

int64_t StepOf(const fs::path& dir) { return std::stoll(dir.filename().string().substr(5)); }

}  // namespace

std::string StepDirName(int64_t global_step) { return fmt::format("step-{:08d}", global_step); }

std::string StepDir(const std::string& root, int64_t global_step) {
  return (fs::path(root) / StepDirName(global_step)).string();
}

std::string StateFileName(int host, int ordinal) { return fmt::format("host-{}-core-{}.state", host, ordinal); }

void WriteManifest(const std::string& step_dir, const Manifest& manifest) {
  const std::string path = ManifestPath(step_dir);
  WriteFileAtomically(path, path, ToJson(manifest).dump(1) + "\n");
}

Manifest ReadManifest(const std::string& step_dir) {
  const std::string path = ManifestPath(step_dir);
  if (!fs::exists(path)) {
    Fail("{}: missing: the save in {} never finished (or its manifest was deleted); resume from "
         "its checkpoint root to take the latest complete save", path, step_dir);
  }
  const std::vector<std::byte> bytes = ReadFileBytes(path);
  try {
    return FromJson(json::parse(reinterpret_cast<const char*>(bytes.data()),
                                reinterpret_cast<const char*>(bytes.data()) + bytes.size()));
  } catch (const Error& e) {
    Fail("{}: not a tpusim checkpoint manifest: {}", path, e.what());
  } catch (const json::exception& e) {
    Fail("{}: not a tpusim checkpoint manifest: {}", path, e.what());
  }
}

void VerifyFiles(const std::string& step_dir, const Manifest& manifest) {
  for (const ManifestFile& f : manifest.files) {
    const std::string path = (fs::path(step_dir) / f.name).string();
    const std::vector<std::byte> bytes = ReadFileBytes(path);
    if (static_cast<int64_t>(bytes.size()) != f.bytes) {
      Fail("{}: {} bytes, the manifest says {} (truncated or replaced)", path, bytes.size(), f.bytes);
    }
    const uint32_t crc = Crc32c(bytes);
    if (crc != f.crc32c) {
      Fail("{}: CRC-32C {:08x}, the manifest says {:08x} (the file is corrupt)", path, crc, f.crc32c);
    }
  }
}

void CheckFingerprint(const std::string& manifest_path, const std::map<std::string, std::string>& saved,
                      const std::map<std::string, std::string>& here) {
  auto show = [](const std::map<std::string, std::string>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? std::string("not set") : it->second;
  };
  std::vector<std::string> keys;
  for (const auto& [k, v] : saved) keys.push_back(k);
  for (const auto& [k, v] : here) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    if (show(saved, key) == show(here, key)) continue;
    Fail("{}: saved by a different config: {} is {} there and {} here; a checkpoint resumes only the "
         "run that shaped its state", manifest_path, key, show(saved, key), show(here, key));
  }
}

std::vector<std::string> CompleteCheckpoints(const std::string& root) {
  std::vector<fs::path> dirs;
  std::error_code error;
  for (const fs::directory_entry& e : fs::directory_iterator(root, error)) {
    if (e.is_directory() && IsStepName(e.path().filename().string()) && fs::exists(e.path() / kManifest)) {
      dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return StepOf(a) < StepOf(b); });
  std::vector<std::string> out;
  for (const fs::path& d : dirs) out.push_back(d.string());
  return out;
}

std::string ResolveCheckpoint(const std::string& path) {
  if (!fs::is_directory(path)) Fail("--resume {}: not a folder", path);
  if (fs::exists(fs::path(path) / kManifest) || IsStepName(fs::path(path).filename().string())) return path;
  const std::vector<std::string> complete = CompleteCheckpoints(path);
  if (complete.empty()) Fail("--resume {}: no complete checkpoint (no step-N folder with a {})", path, kManifest);
  return complete.back();
}

void PruneCheckpoints(const std::string& root, int keep) {
  if (keep <= 0) return;
  const std::vector<std::string> complete = CompleteCheckpoints(root);
  for (size_t i = 0; i + static_cast<size_t>(keep) < complete.size(); ++i) {
    std::error_code ignored;  // a folder that cannot be removed costs disk space, not the run
    fs::remove_all(complete[i], ignored);
  }
}

}  // namespace tpusim::checkpoint
