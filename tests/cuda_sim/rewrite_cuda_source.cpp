// cuda_sim_rewrite INPUT.cu OUTPUT.cpp: turns a CUDA source into C++ that g++ compiles against
// the simulator. Two constructs have no C++ spelling and are rewritten; everything else is left
// to the prelude (cuda_sim/device.h, included first):
//   kernel<<<grid, block[, shared_bytes[, stream]]>>>(args...)
//     -> ::cuda_sim::launch_kernel("kernel", grid, block, shared_bytes, stream, kernel, args...)
//   extern __shared__ T name[];  ->  T* const name = ::cuda_sim::dynamic_shared<T>();
//   __shared__ T name[N];  ->  static T name[N]; ::cuda_sim::poison_static_shared(&name, ...);
// Comments and string/character literals are skipped. Line numbers are kept (a #line directive
// names the .cu file; a rewritten launch is padded with the newlines it lost), so compiler
// messages and debuggers point at the original source.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// is_code[i]: src[i] is outside comments and literals.
std::vector<bool> code_mask(const std::string& src) {
  std::vector<bool> code(src.size(), true);
  size_t i = 0;
  while (i < src.size()) {
    const size_t start = i;
    if (src.compare(i, 2, "//") == 0) {
      while (i < src.size() && src[i] != '\n') ++i;
    } else if (src.compare(i, 2, "/*") == 0) {
      const size_t end = src.find("*/", i + 2);
      i = end == std::string::npos ? src.size() : end + 2;
    } else if (src[i] == 'R' && i + 1 < src.size() && src[i + 1] == '"' &&
               (i == 0 || !(std::isalnum(static_cast<unsigned char>(src[i - 1])) || src[i - 1] == '_'))) {
      const size_t open = src.find('(', i + 2);
      std::string close = src.substr(i + 2, open - (i + 2));  // )delimiter"
      close.insert(close.begin(), ')');
      close.push_back('"');
      const size_t end = src.find(close, open);
      i = end == std::string::npos ? src.size() : end + close.size();
    } else if (src[i] == '"' ||
               (src[i] == '\'' && (i == 0 || !std::isalnum(static_cast<unsigned char>(src[i - 1]))))) {
      const char quote = src[i++];
      while (i < src.size() && src[i] != quote) i += src[i] == '\\' ? 2 : 1;
      ++i;
    } else {
      ++i;
      continue;
    }
    for (size_t j = start; j < i && j < src.size(); ++j) code[j] = false;
  }
  return code;
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Rewriter {
 public:
  Rewriter(std::string src, std::string path)
      : src_(std::move(src)), path_(std::move(path)), code_(code_mask(src_)) {}

  std::string run() {
    std::string out = "#include \"cuda_sim/device.h\"\n#line 1 \"" + path_ + "\"\n";
    size_t copied = 0;  // src_[0, copied) is already in `out` (or replaced)
    for (size_t i = 0; i < src_.size(); ++i) {
      if (!code_[i]) continue;
      if (src_.compare(i, 3, "<<<") == 0) {
        const size_t begin = kernel_start(i);
        if (begin < copied) fail(i, "a launch overlaps the previous rewrite");
        out.append(src_, copied, begin - copied);
        size_t end = 0;
        out += launch_call(begin, i, end);
        copied = end;
        i = end - 1;
      } else if (src_.compare(i, 6, "extern") == 0 && (i == 0 || !is_identifier_char(src_[i - 1])) &&
                 shared_declaration_at(i)) {
        out.append(src_, copied, i - copied);
        size_t end = 0;
        out += dynamic_shared_declaration(i, end);
        copied = end;
        i = end - 1;
      } else if (src_.compare(i, 10, "__shared__") == 0 &&
                 (i == 0 || !is_identifier_char(src_[i - 1])) &&
                 (i + 10 >= src_.size() || !is_identifier_char(src_[i + 10]))) {
        out.append(src_, copied, i - copied);
        size_t end = 0;
        out += static_shared_declaration(i, end);
        copied = end;
        i = end - 1;
      }
    }
    out.append(src_, copied, std::string::npos);
    return out;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    const size_t line = 1 + static_cast<size_t>(std::count(src_.begin(), src_.begin() + static_cast<long>(at), '\n'));
    throw std::runtime_error(path_ + ":" + std::to_string(line) + ": cuda_sim_rewrite: " + what);
  }

  size_t skip_space_back(size_t i) const {  // i: one past; returns one past the last non-space
    while (i > 0 && (std::isspace(static_cast<unsigned char>(src_[i - 1])) || !code_[i - 1])) --i;
    return i;
  }
  size_t skip_space(size_t i) const {
    while (i < src_.size() && (std::isspace(static_cast<unsigned char>(src_[i])) || !code_[i])) ++i;
    return i;
  }

  // The start of the kernel expression before "<<<" at `launch`: a (qualified) name with an
  // optional template argument list.
  size_t kernel_start(size_t launch) const {
    size_t i = skip_space_back(launch);
    if (i > 0 && src_[i - 1] == '>') {
      int depth = 0;
      while (i > 0) {
        --i;
        if (!code_[i]) continue;
        if (src_[i] == '>') ++depth;
        if (src_[i] == '<' && --depth == 0) break;
      }
      if (depth != 0) fail(launch, "unbalanced template arguments before <<<");
      i = skip_space_back(i);
    }
    const size_t name_end = i;
    while (i > 0 && (is_identifier_char(src_[i - 1]) || src_[i - 1] == ':')) --i;
    if (i == name_end) fail(launch, "no kernel name before <<<");
    return i;
  }

  // The index of the bracket closing the one at `open`, over code characters.
  size_t matching(size_t open, char open_char, char close_char) const {
    int depth = 0;
    for (size_t i = open; i < src_.size(); ++i) {
      if (!code_[i]) continue;
      if (src_[i] == open_char) ++depth;
      if (src_[i] == close_char && --depth == 0) return i;
    }
    fail(open, std::string("no matching ") + close_char);
  }

  std::string launch_call(size_t begin, size_t launch, size_t& end) const {
    const std::string kernel = trimmed(src_.substr(begin, launch - begin));
    // The configuration: top-level comma-separated expressions up to ">>>".
    std::vector<std::string> config;
    size_t part = launch + 3, i = launch + 3;
    int depth = 0;
    for (;; ++i) {
      if (i >= src_.size()) fail(launch, "no >>> after <<<");
      if (!code_[i]) continue;
      const char c = src_[i];
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') --depth;
      if (depth == 0 && src_.compare(i, 3, ">>>") == 0) break;
      if (depth == 0 && c == ',') {
        config.push_back(src_.substr(part, i - part));
        part = i + 1;
      }
    }
    config.push_back(src_.substr(part, i - part));
    if (config.size() < 2 || config.size() > 4) fail(launch, "a launch takes 2 to 4 <<<arguments>>>");
    const size_t open = skip_space(i + 3);
    if (open >= src_.size() || src_[open] != '(') fail(launch, "no argument list after >>>");
    const size_t close = matching(open, '(', ')');
    const std::string args = src_.substr(open + 1, close - open - 1);
    end = close + 1;

    // The kernel's address, unless it is a function template whose arguments the launch deduces.
    const bool deduced = kernel.find('<') == std::string::npos && declared_as_template(kernel);
    const std::string address =
        deduced ? "nullptr" : "reinterpret_cast<const void*>(&" + kernel + ")";
    const bool has_args = !trimmed(args).empty();
    std::string call = "::cuda_sim::launch_kernel(\"" + escaped(kernel) + "\", " + config[0] + ", " +
                       config[1] + ", " + (config.size() > 2 ? config[2] : "size_t{0}") + ", " +
                       (config.size() > 3 ? config[3] : "cudaStream_t{}") + ", " + address + ", " +
                       (has_args ? "[](auto&... cuda_sim_arguments) { " + kernel +
                                       "(cuda_sim_arguments...); }, " + args
                                 : "[] { " + kernel + "(); }");
    call += ")";
    // Pad with the newlines the rewrite dropped, so the following lines keep their numbers.
    const auto lost = std::count(src_.begin() + static_cast<long>(begin), src_.begin() + static_cast<long>(end), '\n') -
                      std::count(call.begin(), call.end(), '\n');
    call.append(static_cast<size_t>(lost > 0 ? lost : 0), '\n');
    return call;
  }

  // Whether the file declares `name` as a __global__ function template ("template <...>" right
  // before "__global__ ... name(").
  bool declared_as_template(const std::string& name) const {
    for (size_t at = src_.find("__global__"); at != std::string::npos;
         at = src_.find("__global__", at + 1)) {
      if (!code_[at]) continue;
      const size_t paren = src_.find('(', at);
      if (paren == std::string::npos) break;
      // The declared name: the identifier right before the first '(' that is not
      // __launch_bounds__'s.
      size_t open = paren;
      const size_t callee_end = skip_space_back(open);
      if (callee_end >= 17 && src_.compare(callee_end - 17, 17, "__launch_bounds__") == 0) {
        open = src_.find('(', matching(open, '(', ')'));
      }
      const size_t end = skip_space_back(open);
      size_t begin = end;
      while (begin > 0 && is_identifier_char(src_[begin - 1])) --begin;
      if (src_.compare(begin, end - begin, name) != 0 || end - begin != name.size()) continue;
      const size_t before = skip_space_back(at);
      return before > 0 && src_[before - 1] == '>';
    }
    return false;
  }

  bool shared_declaration_at(size_t i) const {
    const size_t next = skip_space(i + 6);
    return src_.compare(next, 10, "__shared__") == 0;
  }

  std::string dynamic_shared_declaration(size_t begin, size_t& end) const {
    const size_t decl = skip_space(begin + 6) + 10;
    const size_t semicolon = src_.find(';', decl);
    if (semicolon == std::string::npos) fail(begin, "extern __shared__ without ;");
    std::string text = trimmed(src_.substr(decl, semicolon - decl));
    for (const char* attribute : {"__align__", "alignas"}) {
      const size_t at = text.find(attribute);
      if (at != std::string::npos) {
        const size_t close = text.find(')', at);
        text = trimmed(text.substr(0, at) + text.substr(close + 1));
      }
    }
    if (text.size() < 2 || text.compare(text.size() - 2, 2, "[]") != 0) {
      fail(begin, "extern __shared__ must declare an array of unknown size: T name[]");
    }
    text = trimmed(text.substr(0, text.size() - 2));
    size_t name_begin = text.size();
    while (name_begin > 0 && is_identifier_char(text[name_begin - 1])) --name_begin;
    const std::string name = text.substr(name_begin), type = trimmed(text.substr(0, name_begin));
    if (name.empty() || type.empty()) fail(begin, "cannot split extern __shared__ into type and name");
    end = semicolon + 1;
    return type + "* const " + name + " = ::cuda_sim::dynamic_shared<" + type + ">();";
  }

  // `__shared__ T name[N];` -> `static T name[N]; ::cuda_sim::poison_static_shared(...);`: one
  // copy per block (blocks run one after another), poisoned when a block first reaches it, as
  // shared memory holds garbage until written.
  std::string static_shared_declaration(size_t begin, size_t& end) const {
    const size_t semicolon = src_.find(';', begin);
    if (semicolon == std::string::npos) fail(begin, "__shared__ without ;");
    const std::string decl = src_.substr(begin + 10, semicolon - begin - 10);
    if (decl.find('=') != std::string::npos || decl.find(',') != std::string::npos) {
      fail(begin, "a __shared__ declaration must declare one variable without an initializer");
    }
    const size_t bracket = decl.find('[');
    const std::string declarator = trimmed(bracket == std::string::npos ? decl : decl.substr(0, bracket));
    size_t name_begin = declarator.size();
    while (name_begin > 0 && is_identifier_char(declarator[name_begin - 1])) --name_begin;
    const std::string name = declarator.substr(name_begin);
    if (name.empty()) fail(begin, "cannot find the name of a __shared__ variable");
    end = semicolon + 1;
    return "static" + decl + "; ::cuda_sim::poison_static_shared(&" + name + ", sizeof(" + name +
           "));";
  }

  static std::string trimmed(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
  }

  static std::string escaped(const std::string& s) {
    std::string out;
    bool space = false;
    for (const char c : s) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        space = true;
        continue;
      }
      if (space && !out.empty()) out += ' ';
      space = false;
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  }

  std::string src_;
  std::string path_;
  std::vector<bool> code_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cuda_sim_rewrite INPUT.cu OUTPUT.cpp\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string out = Rewriter(buffer.str(), argv[1]).run();
    // Write to a temporary name first, so an interrupted run leaves no half-written output.
    const std::string temporary = std::string(argv[2]) + ".tmp";
    {
      std::ofstream file(temporary, std::ios::binary);
      file << out;
      if (!file) throw std::runtime_error("cannot write " + temporary);
    }
    if (std::rename(temporary.c_str(), argv[2]) != 0) {
      throw std::runtime_error(std::string("cannot rename to ") + argv[2]);
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
