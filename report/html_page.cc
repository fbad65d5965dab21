#include "report/html_page.h"

#include <array>
#include <exception>

#include <fmt/format.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "report/answer_block.h"
#include "report/internal/html_assets.h"
#include "report/report_types.h"

namespace tpusim::report {
namespace {

using json = nlohmann::json;

// The sections the page draws from, and what it cannot show without each.
struct PageSection {
  const char* key;
  const char* shows;
};
constexpr auto kPageSections = std::to_array<PageSection>({
    {"answer", "the answer for the pod (reports since issue 48)"},
    {"pod_projection", "the bottleneck: each stage's projected capacity"},
    {"timeline", "the step over time and the queues over the window (reports since issue 50)"},
    {"placement", "the hosts that fed each core and the mesh positions (reports since issue 50)"},
});

// The page's data in a <script type="application/json">: every '<' escaped, so no
// "</script>" (nor "<!--") in a string of the report can end the element.
std::string InlineJson(const json& data) {
  const std::string text = data.dump();
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// `page` with its one `marker` replaced by `text` (text is not searched again).
void Replace(std::string& page, std::string_view marker, std::string_view text) {
  const size_t at = page.find(marker);
  if (at == std::string::npos) Fail("HTML template: no {} (report/html/)", marker);
  page.replace(at, marker.size(), text);
}

std::string Fill(std::string_view page_template, const std::string& title, const json& data) {
  std::string page(page_template);
  Replace(page, "@TITLE@", EscapeHtml(title));
  Replace(page, "@DATA@", InlineJson(data));
  Replace(page, "/*@PAGE_JS@*/", internal::kPageScript);
  Replace(page, "/*@ECHARTS@*/", internal::kEchartsJs);
  return page;
}

void CheckIsReport(const json& j, const std::string& label) {
  if (!j.is_object()) Fail("{}: not a tpusim report: a JSON {}, not an object", label, j.type_name());
  for (const char* key : {"version", "topology", "cores"}) {
    if (!j.contains(key)) Fail("{}: not a tpusim report: no '{}' field", label, key);
  }
  if (!j["version"].is_number_integer()) Fail("{}: not a tpusim report: 'version' is not a number", label);
}

}  // namespace

std::string ReportPage(const json& report, const std::string& label) {
  CheckIsReport(report, label);
  json data = {{"kind", "report"},       {"report", report}, {"answer_lines", json::array()},
               {"lacks", json::array()}, {"read_note", ""},  {"echarts_version", internal::kEchartsVersion}};
  try {
    data["answer_lines"] = AnswerLines(report.get<Report>());
  } catch (const std::exception& e) {
    data["read_note"] = fmt::format(
        "this tpusim reads report version {} strictly and this one does not read "
        "({}); the page shows what it has",
        kReportVersion, e.what());
  }
  for (const PageSection& s : kPageSections) {
    if (!report.contains(s.key) || report[s.key].is_null()) {
      data["lacks"].push_back(fmt::format("no '{}' section: {}", s.key, s.shows));
    }
  }
  const json& topology = report["topology"];
  const std::string name = topology.is_object() && topology.contains("name") ? topology["name"].dump() : "?";
  return Fill(internal::kReportTemplate, fmt::format("tpusim report: {}", name), data);
}

std::string SweepIndexPage(const SweepIndex& index) {
  const auto or_null = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json points = json::array();
  for (const SweepPoint& p : index.points) {
    points.push_back({{"run", p.run},
                      {"values", p.values},
                      {"measured_au", or_null(p.measured_au)},
                      {"projected_au", or_null(p.projected_au)},
                      {"verdict", p.verdict},
                      {"projected_verdict", p.projected_verdict},
                      {"exit_code", p.exit_code},
                      {"page", p.page}});
  }
  const json data = {{"kind", "sweep"},
                     {"title", index.title},
                     {"keys", index.keys},
                     {"target_au", index.target_au},
                     {"au_source", index.au_source},
                     {"chosen", index.chosen ? json(*index.chosen) : json(nullptr)},
                     {"points", std::move(points)},
                     {"echarts_version", internal::kEchartsVersion}};
  return Fill(internal::kSweepTemplate, index.title, data);
}

void WriteHtmlFile(const std::string& path, const std::string& label, const std::string& page) {
  WriteFileAtomically(path, label, page);
}

}  // namespace tpusim::report
