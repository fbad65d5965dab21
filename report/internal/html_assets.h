// The files the HTML pages are made of, embedded at build time by
// report/html/embed_assets.py: the page templates and the charting library.
#pragma once

#include <string_view>

namespace tpusim::report::internal {

extern const std::string_view kReportTemplate;  // report/html/report.html
extern const std::string_view kSweepTemplate;   // report/html/sweep.html
extern const std::string_view kPageScript;      // report/html/page.js: the glue both share
extern const std::string_view kEchartsJs;       // vendor/echarts/echarts.min.js
extern const std::string_view kEchartsVersion;  // "5.6.0", from vendor/echarts/VERSION

}  // namespace tpusim::report::internal
