// CLI11 validators that hvdrun and hvdagent share, so that every option refuses a value that
// cannot be meant in the same words: an empty path, NaN, an infinite or out-of-range number.
// A value that passed would otherwise reach a cast (NaN seconds become 0: a grace period of
// nothing) or a library that throws (std::filesystem on ""), far from the option that caused it.
//
// Each check returns CLI11's error text, which CLI11 prefixes with the option's name:
// "--grace: 'nan' is not a number of seconds ...". The value is always quoted, so an empty or
// blank value is visible in the message.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace hvd::agent::common {

// 'text' with the quotes: how a refused value appears in every message.
std::string inQuotes(std::string_view text);

// A path, address or list: "" is refused (as is text of blanks only), since an empty value is
// almost always an unset shell variable ("--key-file $KEY").
CLI::Validator nonEmpty();

// A finite number in [min, max]: refuses NaN, infinities, trailing junk and out-of-range values,
// naming `unit` ("seconds") in the message.
CLI::Validator finiteRange(double min, double max, const std::string& unit);

// A whole number in [min, max] (decimal, optional leading '-'); refuses "1.5", "2x", overflow.
CLI::Validator integerRange(long long min, long long max);

// Makes `app` print its parse errors as "<app name>: <error>" (then CLI11's "Run with --help"
// line), like every other error of hvdrun and hvdagent, so a script's log says who refused what.
void prefixErrorsWithName(CLI::App* app);

// The same rules as plain functions, for values that are not CLI11 options (environment
// variables, list items): the problem in words, or "" when `text` is fine.
std::string finiteRangeProblem(const std::string& text, double min, double max,
                               const std::string& unit);
std::string integerRangeProblem(const std::string& text, long long min, long long max);

}  // namespace hvd::agent::common
