//===- Einsum.cpp - ONNX Einsum equations ---------------------------------===//
#include "frontends/onnx/Einsum.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace dsc::onnx_import {

std::string einsumLabelText(int l) {
  return l >= 1000 ? "..." + std::to_string(l - 1000) : std::string(1, char(l));
}

namespace {

struct Term {
  Labels before, after; // the letters before and after "..."
  bool ellipsis = false;
};

bool parseTerm(const std::string &s, Term &t, std::string &why) {
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, "...") == 0) {
      if (t.ellipsis) {
        why = "'" + s + "' has two ellipses";
        return false;
      }
      t.ellipsis = true;
      i += 3;
      continue;
    }
    char c = s[i];
    if (!std::isalpha(static_cast<unsigned char>(c))) {
      why = "'" + s + "' has '" + std::string(1, c) + "', which is not a letter";
      return false;
    }
    (t.ellipsis ? t.after : t.before).push_back(c);
    ++i;
  }
  return true;
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s)
    if (c == sep)
      parts.emplace_back();
    else
      parts.back() += c;
  return parts;
}

} // namespace

std::optional<EinsumSpec> parseEinsum(const std::string &equation,
                                      const std::vector<std::vector<int64_t>> &shapes,
                                      std::string &why) {
  std::string eq;
  for (char c : equation)
    if (c != ' ')
      eq += c;
  const std::string quoted = "equation '" + eq + "'";
  if (eq.empty()) {
    why = "has no equation";
    return std::nullopt;
  }
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
  }
  std::vector<std::string> terms = split(lhs, ',');
  if (terms.size() != shapes.size()) {
    why = quoted + " has " + std::to_string(terms.size()) + " operand terms for " +
          std::to_string(shapes.size()) + " inputs";
    return std::nullopt;
  }
  EinsumSpec spec;
  std::map<int, int> count; // occurrences over the operands
  int64_t ellipsisRank = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    Term t;
    std::string bad;
    const int64_t rank = int64_t(shapes[k].size());
    if (!parseTerm(terms[k], t, bad)) {
      why = quoted + ", operand " + std::to_string(k) + ": " + bad;
      return std::nullopt;
    }
    const int64_t named = int64_t(t.before.size() + t.after.size());
    if (t.ellipsis ? named > rank : named != rank) {
      why = quoted + ", operand " + std::to_string(k) + ": " + std::to_string(named) +
            " labels" + (t.ellipsis ? " and an ellipsis" : "") + " for an operand of rank " +
            std::to_string(rank);
      return std::nullopt;
    }
    const int64_t er = t.ellipsis ? rank - named : 0;
    ellipsisRank = std::max(ellipsisRank, er);
    Labels labels = t.before;
    for (int64_t d = er - 1; d >= 0; --d)
      labels.push_back(1000 + int(d));
    labels.insert(labels.end(), t.after.begin(), t.after.end());
    std::set<int> seen;
    for (size_t d = 0; d < labels.size(); ++d) {
      const int l = labels[d];
      if (!seen.insert(l).second) {
        why = quoted + ": label '" + einsumLabelText(l) + "' repeats in operand " +
              std::to_string(k) + " (a diagonal), which dsc does not lower";
        return std::nullopt;
      }
      const int64_t n = shapes[k][d];
      auto [it, fresh] = spec.size.emplace(l, n);
      if (!fresh && it->second != n) {
        why = quoted + ": label '" + einsumLabelText(l) + "' has size " +
              std::to_string(it->second) + " in one operand and " + std::to_string(n) +
              " in operand " + std::to_string(k) + " (dsc does not broadcast einsum labels)";
        return std::nullopt;
      }
      ++count[l];
    }
    spec.operands.push_back(std::move(labels));
  }
  if (arrow != std::string::npos) {
    Term t;
    std::string bad;
    if (!parseTerm(rhs, t, bad)) {
      why = quoted + ", output: " + bad;
      return std::nullopt;
    }
    if (!t.ellipsis && ellipsisRank) {
      why = quoted + ": the operands have an ellipsis and the output does not";
      return std::nullopt;
    }
    spec.output = t.before;
    for (int64_t d = (t.ellipsis ? ellipsisRank : 0) - 1; d >= 0; --d)
      spec.output.push_back(1000 + int(d));
    spec.output.insert(spec.output.end(), t.after.begin(), t.after.end());
    std::set<int> seen;
    for (int l : spec.output) {
      if (!seen.insert(l).second) {
        why = quoted + ": output label '" + einsumLabelText(l) + "' repeats";
        return std::nullopt;
      }
      if (!spec.size.count(l)) {
        why = quoted + ": output label '" + einsumLabelText(l) + "' is in no operand";
        return std::nullopt;
      }
    }
  } else {
    for (int64_t d = ellipsisRank - 1; d >= 0; --d)
      spec.output.push_back(1000 + int(d));
    for (auto &[l, n] : count)
      if (l < 1000 && n == 1)
        spec.output.push_back(l);
  }
  return spec;
}

} // namespace dsc::onnx_import
