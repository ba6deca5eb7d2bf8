#include "core/checkpoint.h"

#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace shardscope {
namespace {

// safetensors' dtype names.
const char* SafeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF64: return "F64";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kI1: return "BOOL";
  }
  return "?";
}

bool FromSafeName(const std::string& s, DType* t) {
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kI1})
    if (s == SafeName(d)) { *t = d; return true; }
  return false;
}

}  // namespace

absl::Status save_checkpoint(const std::string& path, const std::vector<Tensor*>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<Literal> values;
  int64_t offset = 0;
  for (Tensor* t : tensors) {
    if (!t || !t->defined()) return absl::InvalidArgumentError("save_checkpoint: an undefined tensor");
    if (t->name().empty()) return absl::InvalidArgumentError("save_checkpoint: every tensor needs a name");
    if (header.contains(t->name()))
      return absl::InvalidArgumentError(absl::StrCat("save_checkpoint: two tensors are named '", t->name(), "'"));
    auto v = t->to_host();
    if (!v.ok()) return v.status();
    header[t->name()] = {{"dtype", SafeName(v->shape().dtype)},
                         {"shape", v->shape().dims},
                         {"data_offsets", {offset, offset + v->bytes()}}};
    offset += v->bytes();
    values.push_back(std::move(*v));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  uint64_t n = text.size();
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return absl::PermissionDeniedError(absl::StrCat("save_checkpoint: cannot write ", tmp));
    unsigned char len[8];
    for (int k = 0; k < 8; ++k) len[k] = static_cast<unsigned char>(n >> (8 * k));
    f.write(reinterpret_cast<const char*>(len), 8);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Literal& v : values) f.write(static_cast<const char*>(v.data()), v.bytes());
    if (!f) return absl::DataLossError(absl::StrCat("save_checkpoint: writing ", tmp, " failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::PermissionDeniedError(absl::StrCat("save_checkpoint: cannot rename ", tmp, " to ", path));
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> load_checkpoint(const std::string& path) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a valid safetensors file: ", why));
  };
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be opened"));
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  f.seekg(0);
  unsigned char len[8];
  if (size < 8 || !f.read(reinterpret_cast<char*>(len), 8)) return bad("shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | len[k];
  if (n > static_cast<uint64_t>(size - 8)) return bad(absl::StrCat("header length ", n, " exceeds the file"));
  std::string text(n, '\0');
  f.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return bad("the header is not a JSON object");
  const int64_t data_start = 8 + static_cast<int64_t>(n);
  Checkpoint ckpt;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) ckpt.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    const auto& e = *it;
    DType t;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() ||
        !FromSafeName(e["dtype"].get<std::string>(), &t))
      return bad(absl::StrCat("tensor '", it.key(), "' has no known dtype"));
    if (!e.contains("shape") || !e["shape"].is_array() || !e.contains("data_offsets") ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      return bad(absl::StrCat("tensor '", it.key(), "' lacks a shape or data_offsets"));
    std::vector<int64_t> dims;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return bad(absl::StrCat("tensor '", it.key(), "' has a bad shape"));
      dims.push_back(d.get<int64_t>());
    }
    int64_t begin = e["data_offsets"][0].get<int64_t>(), end = e["data_offsets"][1].get<int64_t>();
    Literal v(Shape(t, dims));
    if (end - begin != v.bytes() || begin < 0 || data_start + end > size)
      return bad(absl::StrCat("tensor '", it.key(), "' ", v.shape().ToString(), " needs ", v.bytes(),
                              " bytes but its data_offsets are [", begin, ", ", end, ")"));
    f.seekg(data_start + begin);
    f.read(static_cast<char*>(v.data()), v.bytes());
    if (!f) return bad(absl::StrCat("reading tensor '", it.key(), "' failed"));
    ckpt.tensors.emplace(it.key(), std::move(v));
  }
  return ckpt;
}

absl::Status load_into(const Checkpoint& ckpt, const std::vector<Tensor*>& tensors, const std::string& path) {
  for (Tensor* t : tensors) {
    auto it = ckpt.tensors.find(t->name());
    if (it == ckpt.tensors.end())
      return absl::NotFoundError(absl::StrCat(path, " has no tensor '", t->name(), "' (it has ",
                                              ckpt.tensors.size(), " tensors)"));
    if (it->second.shape() != t->shape())
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", t->name(), "' is ",
                                                     it->second.shape().ToString(), " in the file but ",
                                                     t->shape().ToString(), " in the model"));
    Tensor v = Tensor::from_host(it->second, t->name());
    if (absl::Status s = t->assign(v); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace shardscope
