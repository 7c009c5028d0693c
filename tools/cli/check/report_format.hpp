// The three forms of a `urnic frame check` report: text for a terminal,
// JSON for scripts, JUnit XML for CI (one testsuite per capture, one
// testcase per rule, a <failure> listing the rule's violations).
#pragma once

#include <span>
#include <string>

#include "tools/cli/check/findings.hpp"

namespace urnic::tools::check {

// Per capture: flow summaries, findings (by first frame), the summary line
// "frame check: N frames, F flows, V violations, W warnings".
std::string format_text(const Report& r);
std::string format_json(std::span<const Report> reports);
std::string format_junit(std::span<const Report> reports);

}  // namespace urnic::tools::check
