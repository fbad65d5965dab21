// The shape of a JSON tree — its keys, array lengths and leaf types — compared
// between two trees, with every pair of leaves at the same place handed to a
// visitor. The typed report's strict from_json (report/report_types.h) uses it to
// reject a field the struct does not know, and the golden-report test to compare
// a fresh report with the one an earlier tpusim wrote.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim::report {

// A pair of leaves of the same type at `path` ("hosts[0].stages.file_read_s").
using LeafPairVisitor =
    std::function<void(const std::string& path, const nlohmann::json& expected, const nlohmann::json& actual)>;

// Every place where `actual` differs in shape from `expected`, in document order:
// "unknown field 'P'" (in `actual` only), "missing field 'P'" (in `expected`
// only), "P: N elements, expected M", "P: a float, expected an integer". A
// non-finite float counts as null (JSON writes it as null). Leaves of the same
// type go to `on_leaf` (may be empty). Empty when the shapes are the same.
std::vector<std::string> ShapeDifferences(const nlohmann::json& expected, const nlohmann::json& actual,
                                          const LeafPairVisitor& on_leaf = {});

}  // namespace tpusim::report
