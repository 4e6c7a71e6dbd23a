//===- JsonLimits.h - bounds checked before a JSON text is parsed -*- C++ -*-===//
//
// nlohmann::json recurses once per nesting level when it destroys, dumps or
// reports an error on a value, so a crafted text nested 100,000 levels deep
// overflows the stack. The nesting is bounded here, before the text reaches
// the library, by one linear scan that needs no recursion itself.
//
// Header-only: dsrt_io (safetensors) and dsrt_config (ds_config) both use it
// and neither library links the other.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_JSONLIMITS_H
#define DSRT_IO_JSONLIMITS_H

#include <cstddef>
#include <optional>
#include <string_view>

namespace dsrt::io {

/// A position in a JSON text: `line` and `column` 1-based (as editors and the
/// parse errors count them), `byte` 0-based.
struct JsonPosition {
  size_t line = 1, column = 1, byte = 0;
};

/// The position of the first '[' or '{' that opens level `maxDepth + 1`, or
/// nullopt when the text never nests deeper than `maxDepth`. Brackets inside
/// strings (escapes honoured) do not count, nor, when `comments` is set (the
/// parser is told to skip them), inside // and /* */ comments. The scan never
/// counts less than the parser would nest, also on malformed text, so a text
/// it accepts cannot nest deeper in the parser.
inline std::optional<JsonPosition>
findExcessNesting(std::string_view text, size_t maxDepth, bool comments) {
  enum class State { Json, String, Escape, LineComment, BlockComment };
  State state = State::Json;
  size_t depth = 0, line = 1, lineStart = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    char next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
    case State::Json:
      if (c == '[' || c == '{') {
        if (++depth > maxDepth)
          return JsonPosition{line, i - lineStart + 1, i};
      } else if (c == ']' || c == '}') {
        // A closer that does not match stops the parser there, so nothing
        // after it is nested by the parser.
        if (depth > 0)
          --depth;
      } else if (c == '"') {
        state = State::String;
      } else if (comments && c == '/' && (next == '/' || next == '*')) {
        state = next == '/' ? State::LineComment : State::BlockComment;
        ++i; // "/*/" does not close the comment
      }
      break;
    case State::String:
      if (c == '\\')
        state = State::Escape;
      else if (c == '"')
        state = State::Json;
      break;
    case State::Escape:
      state = State::String;
      break;
    case State::LineComment:
      // nlohmann ends a // comment at either line break or a NUL.
      if (c == '\n' || c == '\r' || c == '\0')
        state = State::Json;
      break;
    case State::BlockComment:
      if (c == '*' && next == '/') {
        state = State::Json;
        ++i;
      }
      break;
    }
    if (c == '\n') {
      ++line;
      lineStart = i + 1;
    }
  }
  return std::nullopt;
}

} // namespace dsrt::io

#endif // DSRT_IO_JSONLIMITS_H
