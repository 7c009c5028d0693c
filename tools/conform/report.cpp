#include "tools/conform/report.hpp"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

namespace urnic::conform {
namespace {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// "rc.resp.write-ack" -> "rc.resp": the group a summary row counts.
std::string group_of(const std::string& id) {
  const auto dot = id.rfind('.');
  return dot == std::string::npos ? id : id.substr(0, dot);
}

}  // namespace

std::string summary_line(const std::vector<CaseResult>& results) {
  std::map<Verdict, int> n;
  for (const auto& r : results) ++n[r.verdict];
  return fmt::format("conform: {} passed, {} warnings, {} failed, {} not applicable, {} errors", n[Verdict::kPass],
                     n[Verdict::kWarn], n[Verdict::kFail], n[Verdict::kNotApplicable], n[Verdict::kError]);
}

void write_text(std::ostream& out, const RunInfo& run, const std::vector<CaseResult>& results, bool verbose) {
  out << fmt::format("urnic conform: {} ({}) through the agent at {}\n\n", run.device, run.transport, run.peer);
  for (const auto& r : results) {
    out << fmt::format("{:<5} {:<32} {:6.2f} s  {}\n", verdict_name(r.verdict), r.id, r.seconds, r.rule);
    if (r.verdict == Verdict::kFail || r.verdict == Verdict::kWarn) {
      out << "      expected: " << r.expected << "\n      observed: " << r.observed << "\n";
    } else if (r.verdict != Verdict::kPass) {
      out << "      " << r.observed << "\n";
    }
    if (verbose || r.verdict == Verdict::kFail || r.verdict == Verdict::kError)
      for (const auto& l : r.transcript) out << "        " << l << "\n";
  }
  // The summary table: one row per group of cases.
  std::map<std::string, std::map<Verdict, int>> rows;
  for (const auto& r : results) ++rows[group_of(r.id)][r.verdict];
  out << fmt::format("\n{:<12} {:>5} {:>5} {:>5} {:>5} {:>5}\n", "group", "pass", "warn", "fail", "n/a", "error");
  for (auto& [g, n] : rows)
    out << fmt::format("{:<12} {:>5} {:>5} {:>5} {:>5} {:>5}\n", g, n[Verdict::kPass], n[Verdict::kWarn],
                       n[Verdict::kFail], n[Verdict::kNotApplicable], n[Verdict::kError]);
  if (!run.pcap.empty()) out << "\nframes: " << run.pcap << "\n";
  out << summary_line(results) << "\n";
}

void write_json(std::ostream& out, const RunInfo& run, const std::vector<CaseResult>& results) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& r : results)
    cases.push_back({{"id", r.id}, {"rule", r.rule}, {"verdict", verdict_name(r.verdict)}, {"expected", r.expected},
                     {"observed", r.observed}, {"seconds", r.seconds}, {"transcript", r.transcript}});
  nlohmann::json j = {{"peer", run.peer}, {"device", run.device}, {"transport", run.transport},
                      {"pcap", run.pcap}, {"summary", summary_line(results)}, {"cases", cases}};
  out << j.dump(2) << "\n";
}

void write_junit(std::ostream& out, const RunInfo& run, const std::vector<CaseResult>& results) {
  std::map<Verdict, int> n;
  double total = 0;
  for (const auto& r : results) {
    ++n[r.verdict];
    total += r.seconds;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuite name=\"urnic conform {} {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                     xml_escape(run.device), run.transport, results.size(), n[Verdict::kFail], n[Verdict::kError],
                     n[Verdict::kNotApplicable], total);
  for (const auto& r : results) {
    out << fmt::format("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\">\n", xml_escape(group_of(r.id)),
                       xml_escape(r.id), r.seconds);
    out << "    <properties><property name=\"rule\" value=\"" << xml_escape(r.rule) << "\"/>";
    if (r.verdict == Verdict::kWarn)  // JUnit has no warning: a passed case with the warning as a property
      out << "<property name=\"warning\" value=\"" << xml_escape("expected " + r.expected + "; observed " + r.observed)
          << "\"/>";
    out << "</properties>\n";
    if (r.verdict == Verdict::kFail)
      out << "    <failure message=\"" << xml_escape("expected " + r.expected + "; observed " + r.observed) << "\">"
          << xml_escape(joined(r.transcript)) << "</failure>\n";
    else if (r.verdict == Verdict::kError)
      out << "    <error message=\"" << xml_escape(r.observed) << "\">" << xml_escape(joined(r.transcript))
          << "</error>\n";
    else if (r.verdict == Verdict::kNotApplicable)
      out << "    <skipped message=\"" << xml_escape(r.observed) << "\"/>\n";
    out << "    <system-out>" << xml_escape(joined(r.transcript)) << "</system-out>\n";
    out << "  </testcase>\n";
  }
  out << "</testsuite>\n";
}

}  // namespace urnic::conform
