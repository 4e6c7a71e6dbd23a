//===- Section.cpp - key suggestions and typed values -===//
//
// The helpers Section.h declares.
//
//===----------------------------------------------------------------------===//
#include "config/Section.h"

#include <charconv>

namespace dsrt::config::detail {

//===--- key suggestions --------------------------------------------------===//

std::string lower(const std::string &s) {
  std::string r = s;
  for (char &c : r)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

/// Optimal-string-alignment distance (Levenshtein plus adjacent swaps), so a
/// transposed pair like "lr" -> "rl" counts as one edit.
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

/// " (did you mean 'x'?)" for the closest candidate, ignoring case, within a
/// budget that grows with the key's length; "" when nothing is close.
std::string didYouMean(const std::string &key,
                       const std::vector<std::string> &candidates) {
  size_t budget = key.size() <= 3 ? 1 : key.size() <= 12 ? 2 : 3;
  std::string lk = lower(key), best;
  size_t bestDist = budget + 1;
  for (const std::string &c : candidates) {
    // Lengths further apart than the budget cannot be within it; skipping
    // them also keeps a crafted multi-megabyte key from costing a table of
    // its length x the candidate's.
    if (key.size() > c.size() + budget || c.size() > key.size() + budget)
      continue;
    size_t dist = editDistance(lk, lower(c));
    if (dist < bestDist) {
      bestDist = dist;
      best = c;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string join(const std::vector<std::string> &items) {
  std::string r;
  for (const std::string &s : items)
    r += (r.empty() ? "" : ", ") + s;
  return r;
}

//===--- typed access -----------------------------------------------------===//

std::string shown(const json &v) {
  if (v.is_null())
    return "null"; // not "null null"
  std::string text = v.dump();
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + text;
}

/// Shortest text that reads back as `v` ("0.1", not "0.10000000000000001").
std::string formatNumber(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

} // namespace dsrt::config::detail
