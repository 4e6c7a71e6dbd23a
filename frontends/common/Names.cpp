//===- Names.cpp - tensor names for people and --freeze patterns ---------===//
#include "frontends/common/Names.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/Regex.h"

#include <map>
#include <memory>
#include <optional>

namespace dsc::frontend {
namespace {

/// A --freeze pattern: `/regex/` searches the name, anything else is a glob
/// over the whole name.
class NamePattern {
public:
  static llvm::Expected<NamePattern> parse(const std::string &text) {
    NamePattern p;
    p.text_ = text;
    llvm::StringRef t(text);
    if (t.size() >= 2 && t.starts_with("/") && t.ends_with("/")) {
      p.regex_ = std::make_shared<llvm::Regex>(t.drop_front().drop_back());
      std::string error;
      if (t.size() == 2 || !p.regex_->isValid(error))
        return llvm::createStringError("--freeze '" + text + "': invalid regular expression" +
                                       (error.empty() ? std::string(" (empty)") : ": " + error));
      return p;
    }
    // Brace lists expand into sub-patterns; the bound keeps a crafted
    // pattern from expanding exponentially.
    auto glob = llvm::GlobPattern::create(t, /*MaxSubPatterns=*/1024);
    if (!glob)
      return llvm::createStringError("--freeze '" + text + "': invalid glob pattern: " +
                                     llvm::toString(glob.takeError()));
    p.glob_ = std::make_shared<llvm::GlobPattern>(std::move(*glob));
    return p;
  }
  bool matches(llvm::StringRef name) const {
    return regex_ ? regex_->match(name) : glob_->match(name);
  }
  const std::string &text() const { return text_; }

private:
  std::string text_;
  std::shared_ptr<llvm::Regex> regex_;
  std::shared_ptr<llvm::GlobPattern> glob_;
};

} // namespace

llvm::Expected<std::set<std::string>> frozenBy(const std::string &path,
                                               const std::vector<std::string> &patterns,
                                               const std::vector<std::string> &all,
                                               const std::set<std::string> &eligible) {
  std::set<std::string> frozen;
  for (const std::string &text : patterns) {
    auto pattern = NamePattern::parse(text);
    if (!pattern)
      return llvm::createStringError(path + ": " + llvm::toString(pattern.takeError()));
    bool any = false;
    for (const std::string &n : all)
      if (pattern->matches(n)) {
        any = true;
        if (eligible.count(n))
          frozen.insert(n);
      }
    if (!any)
      return llvm::createStringError(
          path + ": --freeze '" + text + "' matches no initializer" +
          (all.empty() ? std::string(" (the model has none)")
                       : "; the initializers are " + compactNames(all)));
  }
  return frozen;
}

/// "{0..3,5}": the values of one number in a group of names, runs of
/// consecutive values as ranges.
static std::string valueSet(const std::vector<std::string> &values) {
  auto number = [](const std::string &v) -> std::optional<long long> {
    if (v.size() > 18 || (v.size() > 1 && v[0] == '0')) // keep "007" as written
      return std::nullopt;
    return std::stoll(v);
  };
  std::vector<std::string> items;
  for (size_t m = 0; m < values.size();) {
    size_t e = m;
    while (e + 1 < values.size() && number(values[e]) && number(values[e + 1]) &&
           *number(values[e + 1]) == *number(values[e]) + 1)
      ++e;
    if (e >= m + 2) {
      items.push_back(values[m] + ".." + values[e]);
    } else {
      for (size_t k = m; k <= e; ++k)
        items.push_back(values[k]);
    }
    m = e + 1;
  }
  return "{" + llvm::join(items, ",") + "}";
}

std::string compactNames(llvm::ArrayRef<std::string> names) {
  // Names are grouped by their text with every number replaced; a group
  // that is every combination of its numbers' values lists those values
  // ("h.{0..11}.ln_{1,2}.weight"), another one shows '*' and its size.
  struct Group {
    std::vector<std::string> texts;                // around the numbers
    std::vector<std::vector<std::string>> members; // each member's numbers
  };
  std::vector<std::string> order;
  std::map<std::string, Group> groups;
  for (const std::string &name : names) {
    std::string key;
    std::vector<std::string> texts(1), numbers;
    for (size_t i = 0; i < name.size();) {
      if (!llvm::isDigit(name[i])) {
        texts.back() += name[i];
        key += name[i++];
        continue;
      }
      size_t j = i;
      while (j < name.size() && llvm::isDigit(name[j]))
        ++j;
      numbers.push_back(name.substr(i, j - i));
      texts.emplace_back();
      key += '#';
      i = j;
    }
    auto [it, isNew] = groups.try_emplace(key);
    if (isNew) {
      order.push_back(key);
      it->second.texts = texts;
    }
    it->second.members.push_back(numbers);
  }

  std::vector<std::string> parts;
  for (const std::string &key : order) {
    const Group &g = groups[key];
    size_t runs = g.texts.size() - 1;
    // The distinct values of each number, in first-seen order (a set to
    // look them up: a model may have 100k initializers).
    std::vector<std::vector<std::string>> values(runs);
    std::vector<std::set<std::string>> seen(runs);
    for (const auto &member : g.members)
      for (size_t r = 0; r < runs; ++r)
        if (seen[r].insert(member[r]).second)
          values[r].push_back(member[r]);
    size_t combinations = 1;
    for (const auto &v : values)
      combinations = std::min<size_t>(combinations * v.size(), g.members.size() + 1);
    std::set<std::vector<std::string>> distinct(g.members.begin(), g.members.end());
    bool product = combinations == g.members.size() && distinct.size() == g.members.size();
    std::string out = g.texts[0];
    for (size_t r = 0; r < runs; ++r) {
      out += values[r].size() == 1 ? values[r][0] : product ? valueSet(values[r]) : "*";
      out += g.texts[r + 1];
    }
    if (!product)
      out += " (" + std::to_string(g.members.size()) + ")";
    parts.push_back(out);
  }
  return llvm::join(parts, ", ");
}

} // namespace dsc::frontend
