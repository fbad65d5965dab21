#include "checkpoint/manifest.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>
#include <span>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/crc32c.h"
#include "base/error.h"
#include "base/file_read.h"
#include "base/printable.h"
#include "base/regular_file.h"
#include "checkpoint/state_file.h"

namespace tpusim::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kManifest = "manifest.json";
constexpr int kVersion = 1;

std::string ManifestPath(const std::string& step_dir) { return (fs::path(step_dir) / kManifest).string(); }

// "step-" and 1 to 18 digits.
bool IsStepName(const std::string& name) {
  constexpr std::string_view kPrefix = "step-";
  constexpr size_t kMaxDigits = 18;  // a step-N beyond int64 is no save of tpusim's
  return name.size() > kPrefix.size() && name.size() <= kPrefix.size() + kMaxDigits && name.starts_with(kPrefix) &&
         std::all_of(name.begin() + kPrefix.size(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::byte> ReadFileBytes(const std::string& path) {
  RefuseNonRegularFile(path);  // a FIFO would block the read below
  const FileContents read = ReadWholeFile(path);
  if (!read.ok()) Fail("{}: missing or unreadable ({})", path, ErrnoText(read.error));
  const auto* first = reinterpret_cast<const std::byte*>(read.bytes.data());
  return std::vector<std::byte>(first, first + read.bytes.size());
}

namespace {

json ToJson(const Manifest& m) {
  json files = json::array();
  for (const ManifestFile& f : m.files) {
    files.push_back(
        {{"name", f.name}, {"host", f.host}, {"ordinal", f.ordinal}, {"bytes", f.bytes}, {"crc32c", f.crc32c}});
  }
  return {{"version", kVersion}, {"global_step", m.global_step}, {"infeed_step", m.infeed_step},
          {"seed", m.seed},      {"fingerprint", m.fingerprint}, {"files", files}};
}

// The manifest's fields, each checked for what it must be before any is used: a
// whole number in range (a 4.5 is not read as 4, a -5 not wrapped), a string, an
// array. Each throws Error "<field>: <value> ..." naming the field.
const json& Field(const json& object, const std::string& parent, const std::string& key) {
  const std::string field = parent.empty() ? key : parent + "." + key;
  if (!object.is_object()) Fail("{}: {} is not an object", parent.empty() ? "the manifest" : parent, object.dump());
  const auto it = object.find(key);
  if (it == object.end()) Fail("{}: missing", field);
  return *it;
}

int64_t WholeNumber(const json& value, const std::string& field, int64_t min, int64_t max) {
  if (!value.is_number_integer()) Fail("{}: {} is not a whole number", field, value.dump());
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(max)) {
    Fail("{}: {} is too large (at most {})", field, value.dump(), max);
  }
  const int64_t number = value.get<int64_t>();
  if (number < min) Fail("{}: {} must be >= {}", field, number, min);
  if (number > max) Fail("{}: {} is too large (at most {})", field, number, max);
  return number;
}

int64_t WholeField(const json& object, const std::string& parent, const std::string& key, int64_t min,
                   int64_t max = std::numeric_limits<int64_t>::max()) {
  return WholeNumber(Field(object, parent, key), parent.empty() ? key : parent + "." + key, min, max);
}

uint64_t SeedField(const json& object) {
  const json& value = Field(object, "", "seed");
  if (!value.is_number_integer()) Fail("seed: {} is not a whole number", value.dump());
  if (!value.is_number_unsigned()) Fail("seed: {} must be >= 0", value.dump());
  return value.get<uint64_t>();
}

std::map<std::string, std::string> FingerprintField(const json& object) {
  const json& value = Field(object, "", "fingerprint");
  if (!value.is_object()) Fail("fingerprint: {} is not an object of config keys", value.dump());
  std::map<std::string, std::string> out;
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) Fail("fingerprint.{}: {} is not a string", Printable(key), text.dump());
    out[key] = text.get<std::string>();
  }
  return out;
}

std::vector<ManifestFile> FilesField(const json& object) {
  const json& files = Field(object, "", "files");
  if (!files.is_array() || files.empty()) Fail("files: {} is not a list of state files", files.dump());
  std::vector<ManifestFile> out;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string at = fmt::format("files[{}]", i);
    const json& name = Field(files[i], at, "name");
    if (!name.is_string()) Fail("{}.name: {} is not a string", at, name.dump());
    out.push_back({name.get<std::string>(), static_cast<int>(WholeField(files[i], at, "host", 0, INT32_MAX)),
                   static_cast<int>(WholeField(files[i], at, "ordinal", 0, INT32_MAX)),
                   WholeField(files[i], at, "bytes", 0),
                   static_cast<uint32_t>(WholeField(files[i], at, "crc32c", 0, UINT32_MAX))});
  }
  return out;
}

Manifest FromJson(const json& j) {
  const int64_t version = WholeField(j, "", "version", 0);
  if (version != kVersion) Fail("version {}, this tpusim reads {}", version, kVersion);
  Manifest m;
  m.global_step = WholeField(j, "", "global_step", 1);
  m.infeed_step = WholeField(j, "", "infeed_step", 1);
  m.seed = SeedField(j);
  m.fingerprint = FingerprintField(j);
  m.files = FilesField(j);
  return m;
}

// What a manifest must say of itself, whatever the run resuming it: its steps
// agree with each other and with its folder's name, every file it lists is the
// state file of its core in the step folder (a name is never a path), once, and
// its seed is the one its fingerprint holds.
void CheckConsistent(const std::string& step_dir, const Manifest& m) {
  if (m.infeed_step < m.global_step) {
    Fail("infeed_step: {} is before global_step {} (every global step takes at least one infeed step)", m.infeed_step,
         m.global_step);
  }
  const std::string folder = fs::path(step_dir).filename().string();
  if (IsStepName(folder) && folder != StepDirName(m.global_step)) {
    Fail("global_step: {} is not the step of its folder {}", m.global_step, folder);
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < m.files.size(); ++i) {
    const ManifestFile& f = m.files[i];
    const std::string expected = StateFileName(f.host, f.ordinal);
    if (f.name != expected) {
      Fail("files[{}].name: '{}' is not {}, host {} core {}'s state file in the step folder", i, Printable(f.name),
           expected, f.host, f.ordinal);
    }
    if (!seen.insert(f.name).second) Fail("files[{}].name: {} is listed twice", i, f.name);
  }
  // The fingerprint holds the config's spelling: compared as a number when it is a decimal one.
  const auto seed = m.fingerprint.find("input.seed");
  if (seed == m.fingerprint.end()) return;
  uint64_t saved = 0;
  const std::string& text = seed->second;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), saved);
  if (error == std::errc() && end == text.data() + text.size() && saved != m.seed) {
    Fail("seed: {} contradicts its fingerprint's input.seed {}", m.seed, text);
  }
}

int64_t StepOf(const fs::path& dir) { return std::stoll(dir.filename().string().substr(5)); }

// Whether anything is at `path`, a FIFO, a dangling link or a loop included: a
// manifest.json that is not a file is then refused by name, not skipped.
bool Present(const fs::path& path) {
  std::error_code ignored;
  return fs::exists(fs::symlink_status(path, ignored));
}

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
  RefuseNonRegularFile(path);
  if (KindOf(path) == FileKind::kMissing) {
    Fail(
        "{}: missing: the save in {} never finished (or its manifest was deleted); resume from "
        "its checkpoint root to take the latest complete save",
        path, step_dir);
  }
  const std::vector<std::byte> bytes = ReadFileBytes(path);
  json parsed;
  try {
    parsed = json::parse(reinterpret_cast<const char*>(bytes.data()),
                         reinterpret_cast<const char*>(bytes.data()) + bytes.size());
  } catch (const json::exception& e) {
    Fail("{}: not a tpusim checkpoint manifest: {}", path, e.what());
  }
  try {
    Manifest manifest = FromJson(parsed);
    CheckConsistent(step_dir, manifest);
    return manifest;
  } catch (const Error& e) {
    Fail("{}: {}", path, e.what());
  }
}

namespace {

// The step a state file holds in section `name`, which its manifest must repeat.
void CheckSavedStep(const StateReader& reader, const std::string& path, const char* name, int64_t manifest_step) {
  int64_t step = 0;
  reader.CopyTo(name, std::as_writable_bytes(std::span(&step, 1)));
  if (step != manifest_step) {
    Fail("{}: holds {} {}, its manifest says {} (the manifest was edited or belongs to another save)", path, name, step,
         manifest_step);
  }
}

}  // namespace

void VerifyFiles(const std::string& step_dir, const Manifest& manifest) {
  for (const ManifestFile& f : manifest.files) {
    const std::string path = (fs::path(step_dir) / f.name).string();
    std::vector<std::byte> bytes = ReadFileBytes(path);
    if (static_cast<int64_t>(bytes.size()) != f.bytes) {
      Fail("{}: {} bytes, the manifest says {} (truncated or replaced)", path, bytes.size(), f.bytes);
    }
    const uint32_t crc = Crc32c(bytes);
    if (crc != f.crc32c) {
      Fail("{}: CRC-32C {:08x}, the manifest says {:08x} (the file is corrupt)", path, crc, f.crc32c);
    }
    const StateReader reader(std::move(bytes), path);
    CheckSavedStep(reader, path, "global_step", manifest.global_step);
    CheckSavedStep(reader, path, "infeed_step", manifest.infeed_step);
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
    Fail(
        "{}: saved by a different config: {} is {} there and {} here; a checkpoint resumes only the "
        "run that shaped its state",
        manifest_path, Printable(key), Printable(show(saved, key)), Printable(show(here, key)));
  }
}

std::vector<std::string> CompleteCheckpoints(const std::string& root) {
  std::vector<fs::path> dirs;
  std::error_code error;
  for (const fs::directory_entry& e : fs::directory_iterator(root, error)) {
    std::error_code not_a_folder;
    if (IsStepName(e.path().filename().string()) && e.is_directory(not_a_folder) && Present(e.path() / kManifest)) {
      dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return StepOf(a) < StepOf(b); });
  std::vector<std::string> out;
  for (const fs::path& d : dirs) out.push_back(d.string());
  return out;
}

std::string ResolveCheckpoint(const std::string& path) {
  RefuseNonDirectory(path, "--resume " + path);
  if (KindOf(path) == FileKind::kMissing) Fail("--resume {}: no such folder", path);
  if (Present(fs::path(path) / kManifest) || IsStepName(fs::path(path).filename().string())) return path;
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
