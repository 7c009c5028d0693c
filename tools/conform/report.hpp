// The report of a conformance run: per case its verdict, the rule, the
// expected and the observed behaviour and the transcript of the exchange;
// as text for people, JSON for machines and JUnit XML for CI systems (one
// test case per rule).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/conform/conform_case.hpp"

namespace urnic::conform {

struct CaseResult {
  std::string id, rule;
  Verdict verdict = Verdict::kError;
  std::string expected, observed;  // FAIL: both; N/A and ERROR: observed says why
  std::vector<std::string> transcript;
  double seconds = 0;
};

struct RunInfo {
  std::string peer;       // the agent's address
  std::string device;     // the device under test, as the agent named it
  std::string transport;  // roce2, roce1, iwarp
  std::string pcap;       // where the frames are, if written
};

void write_text(std::ostream& out, const RunInfo& run, const std::vector<CaseResult>& results, bool verbose);
void write_json(std::ostream& out, const RunInfo& run, const std::vector<CaseResult>& results);
void write_junit(std::ostream& out, const RunInfo& run, const std::vector<CaseResult>& results);

// "conform: P passed, F failed, N not applicable, E errors"
std::string summary_line(const std::vector<CaseResult>& results);

}  // namespace urnic::conform
