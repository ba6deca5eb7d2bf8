#include "core/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardscope {
namespace {

// safetensors' own reader refuses headers over 100 MB.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
constexpr size_t kMaxRank = 16;

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
                             const std::map<std::string, std::string>& metadata, std::source_location loc) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<Literal> values;
  int64_t offset = 0;
  for (Tensor* t : tensors) {
    if (!t || !t->defined()) return absl::InvalidArgumentError("save_checkpoint: an undefined tensor");
    if (t->name().empty()) return absl::InvalidArgumentError("save_checkpoint: every tensor needs a name");
    if (header.contains(t->name()))
      return absl::InvalidArgumentError(absl::StrCat("save_checkpoint: two tensors are named '", t->name(), "'"));
    try {
      (void)nlohmann::json(t->name()).dump();
    } catch (const nlohmann::json::type_error&) {
      return absl::InvalidArgumentError(absl::StrCat("save_checkpoint: the tensor named '", absl::CHexEscape(t->name()),
                                                     "' has a name that is not UTF-8, and a safetensors file's "
                                                     "names are JSON text; rename it"));
    }
    auto v = t->to_host(loc);
    if (!v.ok()) return v.status();
    header[t->name()] = {{"dtype", SafeName(v->shape().dtype)},
                         {"shape", v->shape().dims},
                         {"data_offsets", {offset, offset + v->bytes()}}};
    offset += v->bytes();
    values.push_back(std::move(*v));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error&) {
    return absl::InvalidArgumentError(
        "save_checkpoint: a metadata key or value is not UTF-8, and a safetensors header is JSON text");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  uint64_t n = text.size();
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      return absl::PermissionDeniedError(
          absl::StrCat("save_checkpoint: cannot write ", path, " (its temporary file ", tmp, ": ",
                       std::strerror(errno), ")"));
    unsigned char len[8];
    for (int k = 0; k < 8; ++k) len[k] = static_cast<unsigned char>(n >> (8 * k));
    f.write(reinterpret_cast<const char*>(len), 8);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Literal& v : values) f.write(static_cast<const char*>(v.data()), v.bytes());
    if (!f) {
      const int err = errno;
      f.close();
      std::remove(tmp.c_str());  // a half-written file is no checkpoint
      return absl::DataLossError(absl::StrCat("save_checkpoint: writing ", path, " failed: ", std::strerror(err)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("save_checkpoint: cannot write ", path, ": ", std::strerror(err),
                     err == EISDIR ? " (it is a directory: give a file name)" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> load_checkpoint(const std::string& path) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a valid safetensors file: ", why));
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be opened: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be read: ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                                              : "a special file";
    return absl::InvalidArgumentError(absl::StrCat("checkpoint ", path, " is ", what, ", not a regular file"));
  }
  const int64_t size = st.st_size;
  // Reads exactly `n` bytes at `offset`.
  auto read_at = [&](void* to, int64_t n, int64_t offset) -> bool {
    char* p = static_cast<char*>(to);
    while (n > 0) {
      const ssize_t got = ::pread(fd, p, static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 30)), offset);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got, n -= got, offset += got;
    }
    return true;
  };
  unsigned char len[8];
  if (size < 8 || !read_at(len, 8, 0))
    return bad(absl::StrCat("shorter than its 8-byte header length (", size, " bytes)"));
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | len[k];
  if (n < 2) return bad(absl::StrCat("header length ", n, " cannot hold a JSON object"));
  if (n > kMaxHeaderBytes)
    return bad(absl::StrCat("header length ", n, " is over the ", kMaxHeaderBytes >> 20, " MiB safetensors allows"));
  if (n > static_cast<uint64_t>(size - 8))
    return bad(absl::StrCat("header length ", n, " exceeds the file (", size, " bytes)"));
  std::string text(n, '\0');
  if (!read_at(text.data(), static_cast<int64_t>(n), 8)) return bad("reading the header failed");
  // A key given twice: JSON parsers keep one of them (this one the last),
  // another tool may keep the other, so which bytes a tensor has is not
  // decided by the file. Refused, as safetensors' own reader does.
  std::string twice;
  std::vector<std::set<std::string>> keys_at;  // per open object
  const nlohmann::json::parser_callback_t duplicates = [&](int, nlohmann::json::parse_event_t event,
                                                           nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys_at.emplace_back();
    if (event == E::object_end && !keys_at.empty()) keys_at.pop_back();
    if (event == E::key && !keys_at.empty() && parsed.is_string() && !keys_at.back().insert(parsed.get<std::string>()).second &&
        twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(text, duplicates, /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad("the header is not well-formed JSON");
  if (!twice.empty()) return bad(absl::StrCat("the header gives the key '", absl::CHexEscape(twice), "' twice"));
  if (!header.is_object()) return bad("the header is not a JSON object");
  const int64_t data_start = 8 + static_cast<int64_t>(n);
  const int64_t data_bytes = size - data_start;  // what the data offsets may address
  Checkpoint ckpt;
  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;  // each tensor's bytes: they must tile the data exactly
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string name = absl::CHexEscape(it.key());  // as errors show it
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return bad(absl::StrCat("__metadata__ entry '", absl::CHexEscape(m.key()), "' is not a string"));
        ckpt.metadata[m.key()] = m->get<std::string>();
      }
      if (auto step = ckpt.metadata.find("step"); step != ckpt.metadata.end()) {
        int64_t v = -1;
        const std::string& t = step->second;
        const bool digits = !t.empty() && t.size() <= 10 &&
                            std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits || !absl::SimpleAtoi(t, &v) || v > kMaxCheckpointStep)
          return bad(absl::StrCat("__metadata__ step '", absl::CHexEscape(t.substr(0, 40)),
                                  "' is not a step number (0..", kMaxCheckpointStep, ")"));
      }
      continue;
    }
    const auto& e = *it;
    DType t;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() ||
        !FromSafeName(e["dtype"].get<std::string>(), &t))
      return bad(absl::StrCat("tensor '", name, "' has no known dtype (F32, F64, BF16, F16, I32, I64, BOOL)"));
    if (!e.contains("shape") || !e["shape"].is_array() || !e.contains("data_offsets") ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      return bad(absl::StrCat("tensor '", name, "' lacks a shape or data_offsets"));
    if (e["shape"].size() > kMaxRank)
      return bad(absl::StrCat("tensor '", name, "' has ", e["shape"].size(), " dims (at most ", kMaxRank, ")"));
    // The dims, and the bytes they need, without overflow: a shape that
    // cannot fit in the file is refused before anything is allocated.
    std::vector<int64_t> dims;
    uint64_t bytes = static_cast<uint64_t>(DTypeBytes(t));
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return bad(absl::StrCat("tensor '", name, "' has a bad shape ", e["shape"].dump(),
                                " (dims are non-negative integers)"));
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && bytes > static_cast<uint64_t>(data_bytes) / dim) bytes = UINT64_MAX;  // past the file
      else bytes *= dim;
      dims.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad(absl::StrCat("tensor '", name, "' has data_offsets ", off.dump(),
                              ", not two non-negative integers"));
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    const std::string shape_text = absl::StrCat(SafeName(t), e["shape"].dump());
    if (bytes > static_cast<uint64_t>(data_bytes))
      return bad(absl::StrCat("tensor '", name, "' ", shape_text, " needs more bytes than the file's ", data_bytes,
                              " bytes of data"));
    if (begin > end || end > static_cast<uint64_t>(data_bytes))
      return bad(absl::StrCat("tensor '", name, "' has data_offsets [", begin, ", ", end,
                              ") outside the file's ", data_bytes, " bytes of data"));
    if (end - begin != bytes)
      return bad(absl::StrCat("tensor '", name, "' ", shape_text, " needs ", bytes, " bytes but its data_offsets are [",
                              begin, ", ", end, ")"));
    spans.push_back({begin, end, name});
    Literal v = Literal::Uninitialized(Shape(t, dims));
    if (!read_at(v.data(), v.bytes(), data_start + static_cast<int64_t>(begin)))
      return bad(absl::StrCat("reading tensor '", name, "' failed"));
    ckpt.tensors.emplace(it.key(), std::move(v));
  }
  // The tensors' bytes cover the data exactly, in order, as the format asks:
  // two tensors sharing bytes (one would train on the other's values), bytes
  // no tensor owns, or bytes after the last are a damaged or crafted file.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  const Span* before = nullptr;
  for (const Span& sp : spans) {
    if (sp.end == sp.begin) continue;  // an empty tensor owns no bytes
    if (sp.begin < covered && before)
      return bad(absl::StrCat("tensors '", before->name, "' [", before->begin, ", ", before->end, ") and '", sp.name,
                              "' [", sp.begin, ", ", sp.end, ") share bytes of the data"));
    if (sp.begin > covered)
      return bad(absl::StrCat("bytes [", covered, ", ", sp.begin, ") of the data belong to no tensor (before '",
                              sp.name, "')"));
    covered = std::max(covered, sp.end);
    before = &sp;
  }
  if (covered != static_cast<uint64_t>(data_bytes))
    return bad(absl::StrCat("the file has ", static_cast<uint64_t>(data_bytes) - covered,
                            " bytes after its last tensor's data (", data_bytes, " bytes of data, ", covered,
                            " used)"));
  return ckpt;
}

absl::Status load_into(const Checkpoint& ckpt, const std::vector<Tensor*>& tensors, const std::string& path,
                       std::source_location loc) {
  for (Tensor* t : tensors) {
    auto it = ckpt.tensors.find(t->name());
    if (it == ckpt.tensors.end())
      return absl::NotFoundError(absl::StrCat(path, " has no tensor '", t->name(), "' (it has ",
                                              ckpt.tensors.size(), " tensors)"));
    if (it->second.shape() != t->shape())
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", t->name(), "' is ",
                                                     it->second.shape().ToString(), " in the file but ",
                                                     t->shape().ToString(), " in the model"));
    Tensor v = Tensor::from_host(it->second, t->name(), loc);
    // The layout the tensor had (annotated, propagated) goes with the new
    // value; without it a sharded weight would come back replicated.
    if (const auto& old = t->node(); old && old->is_data() && old->data && v.node()->data) {
      DeviceData& now = *v.node()->data;
      const DeviceData& before = *old->data;
      now.sharding = before.sharding;
      now.sharding_source = before.sharding_source;
      now.sharding_loc = before.sharding_loc;
      now.layout_from_loc = before.layout_from_loc;
      now.layout_from = before.layout_from;
      now.layout_from_by = before.layout_from_by;
    }
    if (absl::Status s = t->assign(v); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace shardscope
