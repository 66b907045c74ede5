// Megatron-LM inputs -> flags: a shell command line (quotes, backslash-newline
// continuations, `torchrun ... pretrain_gpt.py` prefix, --flag=value) or the MODEL_ARGS
// block of a functional-test model_config.yaml. Values are kept as text; the importer
// interprets them.
#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "lcm/model/io/megatron_import.hpp"
#include "megatron_flags.hpp"
#include "yaml_read.hpp"

namespace lcm::io {

namespace {

struct Token {
  std::string text;
  int line = 0, column = 0;
  bool quoted = false;
};

// Shell-like word splitting with positions. Handles '...', "..." (with \" \\ \$ escapes),
// backslash escapes, backslash-newline continuations and # comments.
Result<std::vector<Token>> tokenize(const std::string& s, const std::string& file) {
  std::vector<Token> out;
  int line = 1, col = 1;
  size_t i = 0;
  auto advance = [&](size_t n = 1) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') ++line, col = 1;
      else ++col;
    }
  };
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';') {
      advance();
      continue;
    }
    if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '\n' || (s[i + 1] == '\r' && i + 2 < s.size() && s[i + 2] == '\n'))) {
      advance(s[i + 1] == '\r' ? 3 : 2);
      continue;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') advance();
      continue;
    }
    Token t;
    t.line = line;
    t.column = col;
    while (i < s.size()) {
      const char d = s[i];
      if (d == ' ' || d == '\t' || d == '\r' || d == '\n' || d == ';') break;
      if (d == '\\') {
        if (i + 1 < s.size() && s[i + 1] == '\n') {
          advance(2);
          break;
        }
        advance();
        if (i < s.size()) t.text += s[i], advance();
        continue;
      }
      if (d == '\'' || d == '"') {
        const int ql = line, qc = col;
        t.quoted = true;
        advance();
        while (i < s.size() && s[i] != d) {
          if (d == '"' && s[i] == '\\' && i + 1 < s.size() && std::string_view("\"\\$`\n").find(s[i + 1]) != std::string_view::npos) {
            advance();
            if (s[i] != '\n') t.text += s[i];
            advance();
            continue;
          }
          t.text += s[i];
          advance();
        }
        if (i >= s.size()) return ConfigError{file, ql, qc, "", fmt::format("unterminated {} quote", d == '"' ? "double" : "single")};
        advance();
        continue;
      }
      t.text += d;
      advance();
    }
    out.push_back(std::move(t));
  }
  return out;
}

bool is_flag_token(const Token& t) { return t.text.size() > 2 && t.text.rfind("--", 0) == 0; }
bool looks_like_option(const Token& t) {
  return t.text.size() >= 2 && t.text[0] == '-' && !(t.text[1] >= '0' && t.text[1] <= '9') && t.text[1] != '.';
}

Result<std::vector<MegatronFlag>> split_command_line(const std::string& text, const std::string& display_name);
Result<std::vector<MegatronFlag>> read_model_args(const std::string& yaml_text, const std::string& display_name);

template <class F>
Result<std::vector<MegatronFlag>> guarded(const std::string& file, F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return ConfigError{file, 0, 0, "", std::string("cannot read: ") + e.what()};
  }
}

}  // namespace

namespace {

// kEnvVariables assigned in a script: a word `NAME=V` (`export NAME=V`, `NAME=V torchrun ...`),
// split by the same shell-like tokenizer (quotes, comments); the last assignment wins, as in
// the shell.
Result<std::vector<MegatronFlag>> add_env_assignments(const std::string& text, const std::string& display_name,
                                                      std::vector<MegatronFlag> flags) {
  auto toks = tokenize(text, display_name);
  if (!toks) return toks.error();
  for (const Token& t : toks.value())
    for (const std::string_view name : kEnvVariables)
      if (t.text.size() > name.size() && t.text.starts_with(name) && t.text[name.size()] == '=')
        flags.push_back({std::string(kEnvFlagPrefix) + std::string(name), t.text.substr(name.size() + 1), display_name,
                         t.line, t.column});
  return flags;
}

}  // namespace

Result<std::vector<MegatronFlag>> parse_megatron_command_line(const std::string& text, const std::string& display_name) {
  return guarded(display_name, [&]() -> Result<std::vector<MegatronFlag>> {
    auto flags = split_command_line(text, display_name);
    if (!flags) return flags;
    return add_env_assignments(text, display_name, std::move(flags.value()));
  });
}

Result<std::vector<MegatronFlag>> parse_megatron_model_config(const std::string& yaml_text, const std::string& display_name) {
  return guarded(display_name, [&] { return read_model_args(yaml_text, display_name); });
}

namespace {

// The NAME of every `${NAME[@]}` in `text`, in order (NAME: a shell identifier).
std::vector<std::string> array_references(std::string_view text) {
  auto ident = [](char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  std::vector<std::string> names;
  for (size_t at = text.find("${"); at != std::string_view::npos; at = text.find("${", at + 2)) {
    size_t i = at + 2;
    while (i < text.size() && ident(text[i], i == at + 2)) ++i;
    if (i > at + 2 && text.substr(i).starts_with("[@]}")) names.emplace_back(text.substr(at + 2, i - at - 2));
  }
  return names;
}

// Just after the first `NAME=(` that begins a line (after blanks), or npos.
size_t array_definition(const std::string& s, const std::string& name) {
  const std::string def = name + "=(";
  for (size_t at = s.find(def); at != std::string::npos; at = s.find(def, at + 1)) {
    size_t b = at;
    while (b > 0 && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
    if (b == 0 || s[b - 1] == '\n') return at + def.size();
  }
  return std::string::npos;
}

// A launch script whose training-script arguments are bash arrays, as Megatron-LM's
// examples and `lcm export megatron` write them:
//   MODEL_ARGS=( --num-layers 32 ... )
//   torchrun ... pretrain_gpt.py "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}"
// The arrays named after the first `.py` (on its line and its continuation lines) are read,
// in that order, from their first `NAME=(` definition; everything else in the script (shell
// logic, variables, the launcher) is skipped. nullopt: not such a script.
std::optional<Result<std::vector<Token>>> script_array_tokens(const std::string& s, const std::string& file) {
  for (size_t py = s.find(".py"); py != std::string::npos; py = s.find(".py", py + 3)) {
    size_t end = py;  // end of the logical line: a newline not escaped by a backslash
    while (end < s.size() && !(s[end] == '\n' && (end == 0 || s[end - 1] != '\\'))) ++end;
    const std::string rest = s.substr(py, end - py);
    const std::vector<std::string> names = array_references(rest);
    if (names.empty()) continue;
    std::vector<Token> out;
    for (const std::string& name : names) {
      const size_t open = array_definition(s, name);
      if (open == std::string::npos) {
        const int line = 1 + static_cast<int>(std::count(s.begin(), s.begin() + static_cast<long>(py), '\n'));
        return Result<std::vector<Token>>(ConfigError{
            file, line, 0, "", fmt::format("array {} is passed to the training script but not defined as {}=( ... )", name, name)});
      }
      // The body ends at the first ')' outside quotes and comments.
      size_t close = open;
      char quote = 0;
      for (; close < s.size(); ++close) {
        const char c = s[close];
        if (quote) {
          if (c == quote) quote = 0;
          else if (c == '\\' && quote == '"') ++close;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == '\\') {
          ++close;
        } else if (c == '#' && (close == open || std::isspace(static_cast<unsigned char>(s[close - 1])))) {
          while (close < s.size() && s[close] != '\n') ++close;
        } else if (c == ')') {
          break;
        }
      }
      const int lines_before = static_cast<int>(std::count(s.begin(), s.begin() + static_cast<long>(open), '\n'));
      const size_t line_start = s.rfind('\n', open == 0 ? 0 : open - 1);
      const size_t column = line_start == std::string::npos ? open : open - line_start - 1;
      auto toks = tokenize(std::string(lines_before, '\n') + std::string(column, ' ') + s.substr(open, close - open), file);
      if (!toks) return Result<std::vector<Token>>(toks.error());
      out.insert(out.end(), toks.value().begin(), toks.value().end());
    }
    return Result<std::vector<Token>>(std::move(out));
  }
  return std::nullopt;
}

Result<std::vector<MegatronFlag>> split_command_line(const std::string& text, const std::string& display_name) {
  const auto script = script_array_tokens(text, display_name);
  auto toks = script ? *script : tokenize(text, display_name);
  if (!toks) return toks.error();
  const std::vector<Token>& t = toks.value();
  // Skip the launcher: everything up to the training script (`... pretrain_gpt.py`).
  size_t start = 0;
  for (size_t i = 0; i < t.size() && !script; ++i)
    if (!t[i].quoted && t[i].text.size() > 3 && t[i].text.ends_with(".py")) start = i + 1;
  if (start == 0 && !t.empty() && !is_flag_token(t[0]))
    return ConfigError{display_name, t[0].line, t[0].column, "",
                       fmt::format("expected Megatron flags (--flag value ...) or a launcher line ending in the "
                                   "training script (torchrun ... pretrain_gpt.py --flag ...), got '{}'",
                                   t[0].text)};
  std::vector<MegatronFlag> flags;
  for (size_t i = start; i < t.size();) {
    const Token& tok = t[i];
    if (!is_flag_token(tok))
      return ConfigError{display_name, tok.line, tok.column, "",
                         fmt::format("unexpected argument '{}' (not a --flag, and {} takes no value)", tok.text,
                                     flags.empty() ? std::string("nothing before it") : "--" + flags.back().name)};
    MegatronFlag f;
    f.file = display_name;
    f.line = tok.line;
    f.column = tok.column;
    std::string body = tok.text.substr(2);
    const size_t eq = body.find('=');
    ++i;
    if (eq != std::string::npos) {
      f.name = body.substr(0, eq);
      f.value = body.substr(eq + 1);
    } else {
      f.name = body;
      const MegatronFlagName* known = find_megatron_flag(f.name);
      if (!known || known->takes_value) {  // values up to the next option (nargs='+' flags take several)
        std::string value;
        while (i < t.size() && !looks_like_option(t[i])) value += (value.empty() ? "" : " ") + t[i++].text;
        f.value = value;
      }
    }
    flags.push_back(std::move(f));
  }
  return flags;
}

Result<std::vector<MegatronFlag>> read_model_args(const std::string& yaml_text, const std::string& display_name) {
  auto doc = parse_yaml(yaml_text, display_name);
  if (!doc) return doc.error();
  const YAML::Node& root = doc.value();
  const Loc top{display_name, 1, 1};
  if (!root.IsMap()) return error_at(top, "", "expected a model_config.yaml mapping with a MODEL_ARGS block");
  YAML::Node args;
  bool found = false;
  Loc args_loc = top;
  for (const auto& kv : root)
    if (kv.first.IsScalar() && kv.first.Scalar() == "MODEL_ARGS")
      args = kv.second, args_loc = loc_of(kv.first.Mark(), display_name), found = true;
  if (!found) return error_at(top, "MODEL_ARGS", "no MODEL_ARGS block (a Megatron functional-test model_config.yaml has one)");
  if (args.IsNull()) return std::vector<MegatronFlag>{};  // "MODEL_ARGS:" with no flags
  if (!args.IsMap()) return error_at(args_loc, "MODEL_ARGS", "expected a mapping of --flag: value, got " + describe(args));
  // YAML merge keys ("<<: *BASE_MODEL_ARGS", used by some functional tests): the merged
  // map's flags come first, so the flags written in MODEL_ARGS itself win (argparse: last wins).
  std::vector<YAML::Node> maps;
  for (const auto& kv : args) {
    if (!kv.first.IsScalar() || kv.first.Scalar() != "<<") continue;
    if (kv.second.IsMap()) maps.push_back(kv.second);
    else if (kv.second.IsSequence())
      for (const auto& m : kv.second)
        if (m.IsMap()) maps.push_back(m);
  }
  maps.push_back(args);
  std::vector<MegatronFlag> flags;
  // ENV_VARS (the functional tests' environment): the variables that change what runs.
  for (const auto& kv : root) {
    if (!kv.first.IsScalar() || kv.first.Scalar() != "ENV_VARS" || !kv.second.IsMap()) continue;
    for (const auto& e : kv.second) {
      if (!e.first.IsScalar() || !e.second.IsScalar()) continue;
      const std::string name = e.first.Scalar();
      if (std::find(std::begin(kEnvVariables), std::end(kEnvVariables), name) == std::end(kEnvVariables)) continue;
      const Loc loc = loc_of(e.first.Mark(), display_name);
      flags.push_back({std::string(kEnvFlagPrefix) + name, e.second.Scalar(), display_name, loc.line, loc.column});
    }
  }
  for (const YAML::Node& map : maps) {
    for (const auto& kv : map) {
      const Loc loc = loc_of(kv.first.Mark(), display_name);
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
      if (key == "<<") continue;
      if (key.size() < 3 || key.rfind("--", 0) != 0)
        return error_at(loc, key, "MODEL_ARGS keys are Megatron flags spelled with leading dashes, e.g. --num-layers");
      MegatronFlag f;
      f.name = key.substr(2);
      f.file = display_name;
      f.line = loc.line;
      f.column = loc.column;
      const YAML::Node& v = kv.second;
      if (v.IsSequence()) {
        for (const auto& e : v) {
          if (!e.IsScalar()) return error_at(loc, key, "expected a list of plain values, got a nested " + describe(e));
          f.value += (f.value.empty() ? "" : " ") + e.Scalar();
        }
      } else if (v.IsScalar()) {
        f.value = v.Scalar();
      } else if (!v.IsNull()) {
        return error_at(loc, key, "expected a value, got " + describe(v));
      }
      flags.push_back(std::move(f));
    }
  }
  return flags;
}

}  // namespace
}  // namespace lcm::io
