#include "core/symbols.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace shardscope::internal {
namespace {

struct FunctionSymbol {
  uint64_t start = 0, size = 0;
  std::string name;  // mangled
};

// One object's functions from its .symtab, by start address (as linked:
// the object's load bias, link_map::l_addr, is added at run time).
struct SymbolTable {
  std::vector<FunctionSymbol> functions;
};

SymbolTable ReadSymbolTable(const char* path) {
  SymbolTable t;
  if (elf_version(EV_CURRENT) == EV_NONE) return t;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return t;
  if (Elf* elf = elf_begin(fd, ELF_C_READ, nullptr)) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data) continue;
      const size_t count = sh.sh_size / sh.sh_entsize;
      for (size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
            sym.st_value == 0)
          continue;
        const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
        if (name && *name) t.functions.push_back({sym.st_value, sym.st_size, name});
      }
    }
    elf_end(elf);
  }
  close(fd);
  std::sort(t.functions.begin(), t.functions.end(),
            [](const FunctionSymbol& a, const FunctionSymbol& b) { return a.start < b.start; });
  return t;
}

// The mangled name of the static function holding `addr` in the object the
// dynamic linker placed it in; "" when its table has none.
std::string FromSymbolTable(void* addr, const link_map& object) {
  static std::mutex mu;
  static auto* tables = new std::map<std::string, SymbolTable>();  // by path; kept for the process
  // The main program has no name in its link map (dladdr gives argv[0], which
  // a PATH lookup or a chdir makes another file, or none): its own image.
  const std::string path = object.l_name && *object.l_name ? object.l_name : "/proc/self/exe";
  std::lock_guard<std::mutex> l(mu);
  auto it = tables->find(path);
  if (it == tables->end()) it = tables->emplace(path, ReadSymbolTable(path.c_str())).first;
  const SymbolTable& t = it->second;
  // A return address may be one past its function's end (a call to a noreturn function).
  const uint64_t at = reinterpret_cast<uintptr_t>(addr) - 1 - object.l_addr;
  auto f = std::upper_bound(t.functions.begin(), t.functions.end(), at,
                            [](uint64_t a, const FunctionSymbol& s) { return a < s.start; });
  if (f == t.functions.begin()) return "";
  --f;
  return at < f->start + std::max<uint64_t>(f->size, 1) ? f->name : "";
}

}  // namespace

std::string ShortFunctionName(std::string s) {
  for (size_t at; (at = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(at, 23);
  // A lambda's parameter list inside its name: "{lambda(int)#1}" -> "{lambda#1}".
  for (size_t at = 0; (at = s.find("{lambda(", at)) != std::string::npos;) {
    size_t depth = 0, end = at + 7;
    for (; end < s.size(); ++end) {
      if (s[end] == '(') ++depth;
      if (s[end] == ')' && --depth == 0) break;
    }
    if (end >= s.size()) break;
    s.erase(at + 7, end - (at + 7) + 1);
    at += 7;
  }
  // Parameter lists outside braces and template arguments: an enclosing
  // function's (followed by "::", a const between, as in
  // "Outer(int)::{lambda#1}") are dropped; the function's own ends the name.
  // "operator()" keeps its parentheses.
  int braces = 0, angles = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const char ch = s[k];
    if (s.compare(k, 10, "operator()") == 0) {
      k += 9;
      continue;
    }
    if (s.compare(k, 8, "operator") == 0) {  // operator<, operator<<, operator-> ... are names, not brackets
      k += 7;
      while (k + 1 < s.size() && std::string_view("<>=-!+*/%&|^~[]").find(s[k + 1]) != std::string_view::npos) ++k;
      continue;
    }
    if (ch == '{') ++braces;
    if (ch == '}') --braces;
    if (ch == '<') ++angles;
    if (ch == '>' && angles > 0) --angles;
    if (ch != '(' || braces != 0 || angles != 0) continue;
    size_t depth = 0, end = k;
    for (; end < s.size(); ++end) {
      if (s[end] == '(') ++depth;
      if (s[end] == ')' && --depth == 0) break;
    }
    if (end >= s.size()) {  // unbalanced: keep what is before it
      s.resize(k);
      break;
    }
    size_t next = end + 1;
    if (s.compare(next, 6, " const") == 0) next += 6;
    if (s.compare(next, 2, "::") == 0) {
      s.erase(k, next - k);
      --k;
      continue;
    }
    s.resize(k);
    break;
  }
  // A template function's return type ("void ns::Apply<int>"): the name is after the last space outside brackets.
  braces = angles = 0;
  size_t space = std::string::npos;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s.compare(k, 8, "operator") == 0) break;  // "operator new", "operator bool": spaces of the name
    if (s[k] == '{') ++braces;
    if (s[k] == '}') --braces;
    if (s[k] == '<') ++angles;
    if (s[k] == '>' && angles > 0) --angles;
    if (s[k] == ' ' && braces == 0 && angles == 0) space = k;
  }
  if (space != std::string::npos) s.erase(0, space + 1);
  const std::string call = "}::operator()";  // a lambda's body: named as the lambda
  if (s.size() >= call.size() && s.compare(s.size() - call.size(), call.size(), call) == 0)
    s.resize(s.size() - call.size() + 1);
  return s;
}

std::string FunctionName(void* addr) {
  Dl_info info{};
  link_map* object = nullptr;
  if (!dladdr1(addr, &info, reinterpret_cast<void**>(&object), RTLD_DL_LINKMAP)) return "";
  std::string mangled = info.dli_sname ? info.dli_sname : object ? FromSymbolTable(addr, *object) : "";
  if (mangled.empty()) return "";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string s = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return ShortFunctionName(std::move(s));
}

}  // namespace shardscope::internal
