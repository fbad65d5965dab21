#include "cluster/mesh_axes.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/printable.h"

namespace tpusim::cluster {
namespace {

bool IsAxisNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string AxisNames(const std::vector<MeshAxis>& axes) {
  std::vector<std::string> names;
  for (const MeshAxis& a : axes) names.push_back(a.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

MeshAxis ParseMeshAxis(const std::string& name, std::string_view size_text, const std::string& where) {
  if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), IsAxisNameChar)) {
    Fail("{}: axis name '{}' must be 1 to 64 of A-Z a-z 0-9 _", where, Printable(name, 64));
  }
  int size = 0;
  const auto [end, error] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size);
  const bool whole = !size_text.empty() && end == size_text.data() + size_text.size();
  if (whole && error == std::errc::result_out_of_range) {
    Fail("{}: size '{}' of axis '{}' is too large (more devices than any slice has)", where, Printable(size_text, 40),
         name);
  }
  if (!whole || error != std::errc() || size < 1) {
    Fail("{}: size '{}' of axis '{}' must be a whole number >= 1", where, Printable(size_text, 40), name);
  }
  return {name, size};
}

void CheckDistinctAxes(const std::vector<MeshAxis>& axes, const std::string& where) {
  std::set<std::string> names;
  for (const MeshAxis& a : axes) {
    if (!names.insert(a.name).second) Fail("{}: axis '{}' is given twice", where, a.name);
  }
}

std::vector<MeshAxis> ParseMeshAxes(const std::string& text, const std::string& where) {
  std::vector<MeshAxis> axes;
  const std::string context = fmt::format("{} '{}'", where, text);
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      Fail(
          "{}: '{}' is not NAME=SIZE (axes by increasing network intensity, e.g. "
          "data=16,fsdp=4)",
          context, item);
    }
    axes.push_back(ParseMeshAxis(item.substr(0, eq), std::string_view(item).substr(eq + 1), context));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  CheckDistinctAxes(axes, context);
  return axes;
}

std::string MeshAxesText(const std::vector<MeshAxis>& axes) {
  std::vector<std::string> items;
  for (const MeshAxis& a : axes) items.push_back(fmt::format("{}={}", a.name, a.size));
  return fmt::format("{}", fmt::join(items, ","));
}

void CheckDcnAxes(const std::vector<MeshAxis>& ici, const std::vector<MeshAxis>& dcn, const std::string& where) {
  for (const MeshAxis& a : dcn) {
    const bool known = std::any_of(ici.begin(), ici.end(), [&](const MeshAxis& b) { return a.name == b.name; });
    if (!known) {
      Fail("{}: axis '{}' is not an axis of the mesh ({}); a hybrid mesh gives both the same axes in the same order",
           where, a.name, AxisNames(ici));
    }
  }
  if (dcn.size() != ici.size()) {
    Fail("{}: {} axes ({}) but the mesh has {} ({}); a hybrid mesh gives both the same axes in the same order", where,
         dcn.size(), AxisNames(dcn), ici.size(), AxisNames(ici));
  }
  for (size_t i = 0; i < dcn.size(); ++i) {
    if (dcn[i].name != ici[i].name) {
      Fail("{}: axes in the order {} but the mesh's are {}; a hybrid mesh gives both the same axes in the same order",
           where, AxisNames(dcn), AxisNames(ici));
    }
  }
}

}  // namespace tpusim::cluster
