#include "contract/worker_values.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <vector>

#include "hvd/error.hpp"

namespace hvd::contract {
namespace {

// The unit as a word, for the errors of numbers ("a number of seconds from 0 to 1e+06").
std::string unitWord(std::string_view unit) {
  if (unit == "s") return "seconds";
  if (unit == "ms") return "milliseconds";
  if (unit == "us") return "microseconds";
  if (unit == "B") return "bytes";
  return std::string(unit);
}

std::vector<std::string> words(const char* list) {
  std::vector<std::string> out;
  std::istringstream in(list != nullptr ? list : "");
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// "auto, shm or tcp"
std::string oneOf(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i];
  }
  return out;
}

long long integerOf(const WorkerVariable& v, const std::string& from, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    throw InvalidArgumentError(from + "='" + text + "' is not an integer");
  }
  const auto min = static_cast<long long>(v.min);
  const auto max = static_cast<long long>(v.max);
  if (value < min || value > max) {
    throw InvalidArgumentError(from + "=" + text + " is out of range (expected " +
                               std::to_string(min) + ".." + std::to_string(max) + ")");
  }
  return value;
}

// A decimal number (fractions allowed); nullopt when the text is not one or not finite.
std::optional<double> decimalOf(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

double secondsOf(const WorkerVariable& v, const std::string& from, const std::string& text) {
  const std::optional<double> seconds = decimalOf(text);
  if (!seconds || *seconds <= v.min || *seconds > v.max) {
    throw InvalidArgumentError(from + "='" + text + "' is not a positive number of " +
                               unitWord(v.unit));
  }
  return *seconds;
}

double numberOf(const WorkerVariable& v, const std::string& from, const std::string& text) {
  const std::optional<double> number = decimalOf(text);
  if (!number || *number < v.min || *number > v.max) {
    std::ostringstream expected;
    expected << "a number of " << unitWord(v.unit) << " from " << v.min << " to " << v.max;
    throw InvalidArgumentError(from + "='" + text + "' is not " + expected.str());
  }
  if (v.positive && *number <= v.min) {
    throw InvalidArgumentError(from + "='" + text + "' is not a positive number of " +
                               unitWord(v.unit));
  }
  return *number;
}

// The choice `text` means; Horovod's own words count only under the alias.
std::string choiceOf(const WorkerVariable& v, const std::string& from, const std::string& text) {
  const std::vector<std::string> choices = words(v.choices);
  for (const std::string& choice : choices) {
    if (choice == text) return choice;
  }
  const bool underAlias = v.alias != nullptr && from == v.alias;
  std::string synonyms;
  for (const std::string& synonym : words(underAlias ? v.aliasChoices : nullptr)) {
    const size_t eq = synonym.find('=');
    const std::string word = synonym.substr(0, eq);
    const std::string meaning = synonym.substr(eq + 1);
    if (word == text) return meaning;
    synonyms += ", or " + word + " for " + meaning;
  }
  throw InvalidArgumentError(from + "='" + text + "' is not a " + v.noun + " (expected " +
                             oneOf(choices) + synonyms + ")");
}

}  // namespace

WorkerValue parseWorkerValue(const WorkerVariable& variable, const std::string& from,
                             const std::string& text) {
  WorkerValue value;
  value.from = from;
  value.text = text;
  switch (variable.type) {
    case VariableType::kBool:
    case VariableType::kInt:
    case VariableType::kSize:
      value.integer = integerOf(variable, from, text);
      break;
    case VariableType::kSeconds:
      value.number = secondsOf(variable, from, text);
      break;
    case VariableType::kNumber:
      value.number = numberOf(variable, from, text);
      break;
    case VariableType::kEnum:
      value.text = choiceOf(variable, from, text);
      break;
    case VariableType::kString:
      break;
  }
  return value;
}

std::optional<WorkerValue> readWorkerValue(const WorkerVariable& variable,
                                           const EnvReader& getenv) {
  const char* from = variable.name;
  const char* text = getenv(from);
  if ((text == nullptr || *text == '\0') && variable.alias != nullptr) {
    from = variable.alias;
    text = getenv(from);
  }
  if (text == nullptr || *text == '\0') return std::nullopt;
  return parseWorkerValue(variable, from, text);
}

std::string workerVariableLabel(const WorkerVariable& variable) {
  std::string_view name = variable.name;
  if (name.rfind("HVD_", 0) == 0) name.remove_prefix(4);
  std::string label;
  for (const char c : name) {
    label += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return label;
}

}  // namespace hvd::contract
