#include "runtime/compile_cache.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "compiler/parser.h"
#include "compiler/text.h"

namespace shardscope::runtime {
namespace {

using nlohmann::json;

json ShapeJson(const Shape& s) { return {{"dtype", DTypeName(s.dtype)}, {"dims", s.dims}}; }

absl::StatusOr<Shape> ShapeOf(const json& j) {
  auto t = ParseDType(j.at("dtype").get<std::string>());
  if (!t.ok()) return t.status();
  return Shape(*t, j.at("dims").get<std::vector<int64_t>>());
}

// FNV-1a, 64 bits: a file name for a key (the key itself is stored and checked).
std::string FileName(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return absl::StrCat(buf, ".sscache");
}

absl::StatusOr<std::shared_ptr<Executable>> Decode(const std::string& key, const std::string& text) {
  json j = json::parse(text);  // throws on damage; the caller turns that into an error
  if (j.at("version").get<std::string>() != kCompilerVersion || j.at("key").get<std::string>() != key)
    return absl::DataLossError("entry was written for another key or compiler version");
  auto exe = std::make_shared<Executable>();
  auto program = compiler::ParseModule(j.at("program").get<std::string>());
  if (!program.ok()) return program.status();
  exe->program = *std::move(program);
  exe->ir_after = j.at("program").get<std::string>();
  exe->ir_before = j.at("ir_before").get<std::string>();
  exe->fingerprint = j.at("fingerprint").get<std::string>();
  exe->op_count = j.at("op_count").get<int>();
  for (const auto& s : j.at("param_shapes")) {
    auto shape = ShapeOf(s);
    if (!shape.ok()) return shape.status();
    exe->param_shapes.push_back(*shape);
  }
  for (const auto& s : j.at("output_shapes")) {
    auto shape = ShapeOf(s);
    if (!shape.ok()) return shape.status();
    exe->output_shapes.push_back(*shape);
  }
  for (const char* field : {"param_shardings", "output_shardings"})
    for (const auto& s : j.at(field)) {
      auto sharding = Sharding::Parse(s.get<std::string>());
      if (!sharding.ok()) return sharding.status();
      (std::string(field) == "param_shardings" ? exe->param_shardings : exe->output_shardings).push_back(*sharding);
    }
  for (const auto& m : j.at("moved_values")) exe->moved_values.push_back({m.at(0).get<int64_t>(), m.at(1).get<int64_t>()});
  for (const auto& d : j.at("decisions"))
    exe->sharding.decisions.push_back({d.at(0).get<int64_t>(), d.at(1).get<std::string>(), d.at(2).get<std::string>(),
                                       d.at(3).get<std::string>(), d.at(4).get<std::string>(),
                                       d.at(5).get<std::string>(), d.at(6).get<int>(), d.at(7).get<int64_t>()});
  for (const auto& m : j.at("rematerializations")) {
    exe->sharding.rematerializations.push_back({m.at(0).get<int64_t>(), m.at(1).get<std::string>(),
                                                m.at(2).get<std::string>(), m.at(3).get<int64_t>(),
                                                m.at(4).get<std::string>(), m.at(5).get<int>()});
    exe->rematerializations.push_back(
        {m.at(0).get<int64_t>(), m.at(2).get<std::string>(), m.at(3).get<int64_t>(),
         compiler::SourceLoc{m.at(4).get<std::string>(), m.at(5).get<int>(), ""}});
  }
  if (exe->param_shardings.size() != exe->program->parameters().size())
    return absl::DataLossError("entry's program and input layouts disagree");
  return exe;
}

}  // namespace

std::string CompileCache::PathOf(const std::string& key) const {
  return (std::filesystem::path(dir_) / FileName(key)).string();
}

absl::StatusOr<std::optional<std::shared_ptr<Executable>>> CompileCache::Load(const std::string& key) {
  const std::string path = PathOf(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ++misses_;
    return std::optional<std::shared_ptr<Executable>>();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<std::shared_ptr<Executable>> exe;
  try {
    exe = Decode(key, ss.str());
  } catch (const std::exception& e) {
    exe = absl::DataLossError(e.what());
  }
  if (!exe.ok()) {
    ++unreadable_;
    ++misses_;
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return absl::DataLossError(absl::StrCat("compile cache entry ", path, " is unreadable (", exe.status().message(),
                                            "); removed, recompiling"));
  }
  ++hits_;
  return std::optional<std::shared_ptr<Executable>>(*exe);
}

absl::Status CompileCache::Store(const std::string& key, const Executable& exe) {
  json j;
  j["version"] = kCompilerVersion;
  j["key"] = key;
  j["program"] = compiler::PrintModule(*exe.program);
  j["ir_before"] = exe.ir_before;
  j["fingerprint"] = exe.fingerprint;
  j["op_count"] = exe.op_count;
  j["param_shapes"] = json::array();
  for (const Shape& s : exe.param_shapes) j["param_shapes"].push_back(ShapeJson(s));
  j["output_shapes"] = json::array();
  for (const Shape& s : exe.output_shapes) j["output_shapes"].push_back(ShapeJson(s));
  j["param_shardings"] = json::array();
  for (const Sharding& s : exe.param_shardings) j["param_shardings"].push_back(s.ToString());
  j["output_shardings"] = json::array();
  for (const Sharding& s : exe.output_shardings) j["output_shardings"].push_back(s.ToString());
  j["moved_values"] = exe.moved_values;
  j["decisions"] = json::array();
  for (const auto& d : exe.sharding.decisions)
    j["decisions"].push_back({d.op_id, d.name, d.sharding, d.source, d.via, d.source_file, d.source_line, d.from_op_id});
  j["rematerializations"] = json::array();
  for (const auto& m : exe.sharding.rematerializations)
    j["rematerializations"].push_back({m.op_id, m.value, m.op, m.bytes, m.source_file, m.source_line});
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  // A unique temporary name, renamed into place: readers in other processes
  // see the old entry or the whole new one, never a part.
  std::random_device rd;
  const std::string tmp = absl::StrCat(PathOf(key), ".tmp.", getpid(), ".", rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write the compile cache entry ", tmp));
    out << j.dump();
    if (!out.flush()) return absl::UnavailableError(absl::StrCat("cannot write the compile cache entry ", tmp));
  }
  std::filesystem::rename(tmp, PathOf(key), ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::UnavailableError(absl::StrCat("cannot store the compile cache entry ", PathOf(key)));
  }
  return absl::OkStatus();
}

}  // namespace shardscope::runtime
