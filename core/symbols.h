// Names of the functions on a call stack, for the call sites of
// recompilations ("train.cc:40 mark_step <- TrainStep <- main").
#pragma once

#include <string>

namespace shardscope::internal {

// The function holding return address `addr`, demangled and shortened
// (no parameters; "(anonymous namespace)::" dropped; a lambda as
// "main::{lambda#1}"), or "" when no symbol covers it. dladdr names what the
// dynamic symbol table exports; functions it cannot see (static, in an
// anonymous namespace, a program linked without -rdynamic) are looked up in
// the object's own symbol table (.symtab, through libelf), when not stripped.
std::string FunctionName(void* addr);

// The shortening alone, of a demangled name.
std::string ShortFunctionName(std::string demangled);

}  // namespace shardscope::internal
