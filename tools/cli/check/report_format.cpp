#include "tools/cli/check/report_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

namespace urnic::tools::check {
namespace {

const Rule* rule_of(std::string_view id) {
  for (const Rule& r : rules())
    if (r.id == id) return &r;
  return nullptr;
}

std::string frames_text(const std::vector<uint64_t>& frames) {
  if (frames.empty()) return "-";
  std::string s;
  for (uint64_t f : frames) s += (s.empty() ? "" : ",") + std::to_string(f);
  return s;
}

// Findings in frame order (those about a whole flow last), stable.
std::vector<const Finding*> ordered(const Report& r) {
  std::vector<const Finding*> v;
  for (const Finding& f : r.findings) v.push_back(&f);
  std::stable_sort(v.begin(), v.end(), [](const Finding* a, const Finding* b) {
    auto first = [](const Finding* f) {
      return f->frames.empty() ? std::numeric_limits<uint64_t>::max() : f->frames.front();
    };
    return first(a) < first(b);
  });
  return v;
}

std::string line(const Finding& f) {
  return fmt::format("{} {} frames {}: {}: {}", to_string(f.severity), f.rule, frames_text(f.frames), f.flow,
                     f.message);
}

std::string xml_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

}  // namespace

std::string format_text(const Report& r) {
  std::string s = fmt::format("capture {}: {} frames\n", r.capture, r.frames);
  for (const std::string& n : r.notes) s += fmt::format("note: {}\n", n);
  for (const FlowSummary& f : r.flows) {
    s += fmt::format("flow {} ({}): {} frames\n", f.name, f.kind, f.frames);
    for (const std::string& n : f.notes) s += fmt::format("  {}\n", n);
  }
  if (!r.findings.empty()) s += "findings:\n";
  for (const Finding* f : ordered(r)) s += "  " + line(*f) + "\n";
  s += fmt::format("frame check: {} frames, {} flows, {} violations, {} warnings\n", r.frames, r.flows.size(),
                   r.count(Severity::kViolation), r.count(Severity::kWarning));
  return s;
}

std::string format_json(std::span<const Report> reports) {
  nlohmann::json captures = nlohmann::json::array();
  std::size_t violations = 0, warnings = 0;
  for (const Report& r : reports) {
    nlohmann::json flows = nlohmann::json::array();
    for (const FlowSummary& f : r.flows)
      flows.push_back({{"name", f.name}, {"kind", f.kind}, {"frames", f.frames}, {"notes", f.notes}});
    nlohmann::json findings = nlohmann::json::array();
    for (const Finding* f : ordered(r)) {
      const Rule* rule = rule_of(f->rule);
      findings.push_back({{"rule", std::string(f->rule)},
                          {"severity", std::string(to_string(f->severity))},
                          {"citation", rule != nullptr ? std::string(rule->citation) : std::string()},
                          {"frames", f->frames},
                          {"flow", f->flow},
                          {"message", f->message}});
    }
    violations += r.count(Severity::kViolation);
    warnings += r.count(Severity::kWarning);
    captures.push_back({{"capture", r.capture},
                        {"frames", r.frames},
                        {"notes", r.notes},
                        {"flows", flows},
                        {"findings", findings},
                        {"violations", r.count(Severity::kViolation)},
                        {"warnings", r.count(Severity::kWarning)}});
  }
  const nlohmann::json doc{{"captures", captures}, {"violations", violations}, {"warnings", warnings}};
  return doc.dump(2) + "\n";
}

std::string format_junit(std::span<const Report> reports) {
  std::string body;
  std::size_t tests = 0, failures = 0;
  for (const Report& r : reports) {
    std::string cases;
    std::size_t suite_failures = 0;
    for (const Rule& rule : rules()) {
      std::string failed, other;
      std::size_t n_failed = 0;
      for (const Finding* f : ordered(r)) {
        if (f->rule != rule.id) continue;
        if (f->severity == Severity::kViolation) {
          failed += xml_escape(line(*f)) + "\n";
          ++n_failed;
        } else {
          other += xml_escape(line(*f)) + "\n";
        }
      }
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\">\n", xml_escape(r.capture), rule.id);
      if (n_failed != 0) {
        cases += fmt::format("      <failure type=\"violation\" message=\"{} violation{} ({})\">{}</failure>\n",
                             n_failed, n_failed == 1 ? "" : "s", xml_escape(rule.citation), failed);
        ++suite_failures;
      }
      if (!other.empty()) cases += fmt::format("      <system-out>{}</system-out>\n", other);
      cases += "    </testcase>\n";
    }
    tests += rules().size();
    failures += suite_failures;
    body += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\">\n{}"
        "  </testsuite>\n",
        xml_escape(r.capture), rules().size(), suite_failures, cases);
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"urnic frame check\" tests=\"{}\" failures=\"{}\">\n{}</testsuites>\n",
      tests, failures, body);
}

}  // namespace urnic::tools::check
