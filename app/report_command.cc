// `tpusim report REPORT.json --html FILE`: the page of a report written earlier
// (report/html_page.h). A report of an older version is shown as far as it goes,
// the page saying what it lacks; a file that is not a report is one line, exit 2.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/command.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file_read.h"
#include "report/html_page.h"

namespace tpusim::app {
namespace {

struct ReportOptions {
  std::string report;
  std::string html;
};

nlohmann::json ReadReportJson(const std::string& path) {
  const FileContents file = ReadWholeFile(path);
  if (!file.ok()) Fail("{}: cannot read: {}", path, std::strerror(file.error));
  nlohmann::json j = nlohmann::json::parse(file.bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) Fail("{}: not a tpusim report: not JSON", path);
  return j;
}

int RunReportCommand(const ReportOptions& options) {
  const std::string label = "--html " + options.html;
  CheckFileWritable(options.html, label);
  const std::string page = report::ReportPage(ReadReportJson(options.report), options.report);
  report::WriteHtmlFile(options.html, label, page);
  fmt::print("wrote {} ({:.1f} MB)\n", options.html, static_cast<double>(page.size()) / 1e6);
  return 0;
}

}  // namespace

void AddReportCommand(CLI::App& app, std::vector<Command>& commands) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand("report", "write a report's page: tpusim report REPORT.json --html FILE");
  cmd->add_option("REPORT", options->report, "a report written by --report")->required();
  cmd->add_option("--html", options->html, "write the report as one self-contained HTML page here")->required();
  commands.push_back({cmd, false, [options](CommandLine&) { return RunReportCommand(*options); }});
}

}  // namespace tpusim::app
