#include "core/symbols.h"

#include <cxxabi.h>
#include <dlfcn.h>
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
#include <vector>

namespace shardscope::internal {
namespace {

struct FunctionSymbol {
  uint64_t start = 0, size = 0;
  std::string name;  // mangled
};

// One object's functions from its .symtab, by start address.
struct SymbolTable {
  bool relative = true;  // a shared object or PIE: addresses are offsets from its load base
  std::vector<FunctionSymbol> functions;
};

SymbolTable ReadSymbolTable(const char* path) {
  SymbolTable t;
  if (elf_version(EV_CURRENT) == EV_NONE) return t;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return t;
  if (Elf* elf = elf_begin(fd, ELF_C_READ, nullptr)) {
    GElf_Ehdr header;
    if (gelf_getehdr(elf, &header)) t.relative = header.e_type == ET_DYN;
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

// The mangled name of the static function holding `addr` in the object
// dladdr placed it in; "" when its table has none.
std::string FromSymbolTable(void* addr, const Dl_info& info) {
  static std::mutex mu;
  static auto* tables = new std::map<std::string, SymbolTable>();  // by path; kept for the process
  if (!info.dli_fname || !*info.dli_fname) return "";
  std::lock_guard<std::mutex> l(mu);
  auto it = tables->find(info.dli_fname);
  if (it == tables->end()) it = tables->emplace(info.dli_fname, ReadSymbolTable(info.dli_fname)).first;
  const SymbolTable& t = it->second;
  // A return address may be one past its function's end (a call to a noreturn function).
  uint64_t at = reinterpret_cast<uintptr_t>(addr) - 1;
  if (t.relative) at -= reinterpret_cast<uintptr_t>(info.dli_fbase);
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
  // Parameter lists outside braces: an enclosing function's (followed by
  // "::", as in "Outer(int)::{lambda#1}", a const after it included) are
  // dropped; the function's own ends the name.
  int braces = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '{') ++braces;
    if (s[k] == '}') --braces;
    if (s[k] != '(' || braces != 0) continue;
    size_t depth = 0, end = k;
    for (; end < s.size(); ++end) {
      if (s[end] == '(') ++depth;
      if (s[end] == ')' && --depth == 0) break;
    }
    size_t next = end + 1;
    if (s.compare(next, 6, " const") == 0) next += 6;
    if (end < s.size() && s.compare(next, 2, "::") == 0) {
      s.erase(k, next - k);
      --k;
      continue;
    }
    s.resize(k);
    break;
  }
  const std::string call = "}::operator";  // a lambda's body: named as the lambda
  if (s.size() >= call.size() && s.compare(s.size() - call.size(), call.size(), call) == 0)
    s.resize(s.size() - call.size() + 1);
  return s;
}

std::string FunctionName(void* addr) {
  Dl_info info{};
  if (!dladdr(addr, &info)) return "";
  std::string mangled = info.dli_sname ? info.dli_sname : FromSymbolTable(addr, info);
  if (mangled.empty()) return "";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string s = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return ShortFunctionName(std::move(s));
}

}  // namespace shardscope::internal
