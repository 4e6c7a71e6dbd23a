//===- Names.h - tensor names for people and --freeze patterns --*- C++ -*-===//
#ifndef DSC_FRONTENDS_COMMON_NAMES_H
#define DSC_FRONTENDS_COMMON_NAMES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <set>
#include <string>
#include <vector>

namespace dsc::frontend {

/// A short list of tensor names for people: names that differ only in one
/// number are merged ("h.{0..11}.ln_1.weight"), in first-seen order.
std::string compactNames(llvm::ArrayRef<std::string> names);

/// The names of `eligible` that the --freeze `patterns` match (a glob over
/// the whole name, or `/regex/` anywhere in it). A pattern that matches no
/// name of `all` is an error naming `path` and listing the names.
llvm::Expected<std::set<std::string>> frozenBy(const std::string &path,
                                               const std::vector<std::string> &patterns,
                                               const std::vector<std::string> &all,
                                               const std::set<std::string> &eligible);

} // namespace dsc::frontend

#endif // DSC_FRONTENDS_COMMON_NAMES_H
