// Loading YAML the way every tpusim reader needs it: parse errors become
// tpusim::Error with file, line and column, and a document is rejected when a map
// repeats a key (yaml-cpp keeps both and readers would silently see one), when a
// key is not a plain string (a list or map used as a key), or when aliases expand
// it beyond a bounded number of nodes (a "billion laughs" document). Run configs,
// --set values and topology files all load through here.
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace tpusim {

// Nodes a document may expand to, aliases counted at every use.
inline constexpr int64_t kMaxYamlNodes = 1'000'000;

// Parses `text`; `source` names it in messages ("run.yaml", "--set a.b=..."). An
// empty document gives a null node. Throws Error on malformed YAML or a document
// CheckYamlDocument rejects.
YAML::Node LoadStrictYaml(std::string_view text, const std::string& source);

// Reads and parses the file `path` like LoadStrictYaml. Throws Error naming the
// path when it is missing, not a regular file or unreadable.
YAML::Node LoadStrictYamlFile(const std::string& path);

// Throws Error "<source>:<line>: ..." for a duplicate key, a key that is not a
// scalar, or more than kMaxYamlNodes nodes.
void CheckYamlDocument(const YAML::Node& root, const std::string& source);

}  // namespace tpusim
