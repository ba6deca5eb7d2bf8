#include "runtime/compile_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "compiler/parser.h"
#include "compiler/text.h"

namespace shardscope::runtime {
namespace {

using nlohmann::json;

// An entry's header line is short; anything longer without a newline is not one.
constexpr size_t kMaxHeaderBytes = 256;
// A larger file at an entry's path is not one of ours (programs are megabytes at most).
constexpr int64_t kMaxEntryBytes = int64_t{1} << 30;

json ShapeJson(const Shape& s) { return {{"dtype", DTypeName(s.dtype)}, {"dims", s.dims}}; }

absl::StatusOr<Shape> ShapeOf(const json& j) {
  auto t = ParseDType(j.at("dtype").get<std::string>());
  if (!t.ok()) return t.status();
  return Shape(*t, j.at("dims").get<std::vector<int64_t>>());
}

std::string Hex128(XXH128_hash_t h) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

// XXH3-128 over `a` then `b`, as 32 hex digits.
std::string Checksum(absl::string_view a, absl::string_view b) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, a.data(), a.size());
  XXH3_128bits_update(st, b.data(), b.size());
  std::string hex = Hex128(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return hex;
}

// The file name for a key: its XXH3-128 together with the entry format, so a
// format change moves every entry to a new name (old ones are never opened).
std::string FileName(const std::string& key) {
  const std::string named = absl::StrCat(key, "\n", kEntryMagic, " ", kEntryFormatVersion);
  return absl::StrCat(Hex128(XXH3_128bits(named.data(), named.size())), ".sscache");
}

// "a FIFO", "a directory", ... for a file that is not regular.
const char* KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// This host's name as it appears in temporary file names: letters, digits and dashes.
std::string HostTag() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) buf[0] = '\0';
  std::string tag;
  for (const char* p = buf; *p; ++p) tag += absl::ascii_isalnum(*p) || *p == '-' ? *p : '_';
  return tag.empty() ? "host" : tag;
}

absl::Status ReadAll(int fd, int64_t size, std::string* out) {
  out->resize(size);
  int64_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out->data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::DataLossError(absl::StrCat("read failed: ", std::strerror(errno)));
    if (n == 0) break;  // shrank while we read: the size check below says so
    done += n;
  }
  out->resize(done);
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(std::strerror(errno));
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

// Checks an entry's framing — header, sizes, checksum, key — and returns its body.
absl::StatusOr<absl::string_view> Unframe(absl::string_view file, const std::string& key) {
  if (file.empty()) return absl::DataLossError("empty (0 bytes; a write that never finished)");
  const size_t eol = file.substr(0, kMaxHeaderBytes).find('\n');
  const bool ours =
      file.substr(0, std::strlen(kEntryMagic)) == absl::string_view(kEntryMagic).substr(0, file.size());
  if (eol == absl::string_view::npos)
    return absl::DataLossError(
        ours ? absl::StrCat("truncated inside its header (", file.size(), " bytes)")
             : absl::StrCat("not a compile cache entry (no '", kEntryMagic, "' header)"));
  const absl::string_view header = file.substr(0, eol);
  const std::vector<absl::string_view> f = absl::StrSplit(header, ' ');
  if (f[0] != kEntryMagic)
    return absl::DataLossError(absl::StrCat("not a compile cache entry (no '", kEntryMagic, "' header)"));
  int version = 0;
  if (f.size() < 2 || !absl::SimpleAtoi(f[1], &version))
    return absl::DataLossError("garbled header (no format version)");
  if (version != kEntryFormatVersion)
    return absl::DataLossError(
        absl::StrCat("entry format version ", f[1], ", this build reads version ", kEntryFormatVersion));
  int64_t key_bytes = 0, body_bytes = 0;
  if (f.size() != 5 || !absl::SimpleAtoi(f[2], &key_bytes) || !absl::SimpleAtoi(f[3], &body_bytes) ||
      key_bytes < 0 || body_bytes < 0 || key_bytes > kMaxEntryBytes || body_bytes > kMaxEntryBytes ||
      f[4].size() != 32)
    return absl::DataLossError(absl::StrCat("garbled header '", absl::CEscape(header), "'"));
  const int64_t want = static_cast<int64_t>(eol) + 1 + key_bytes + 1 + body_bytes;
  const int64_t have = static_cast<int64_t>(file.size());
  if (have < want) return absl::DataLossError(absl::StrCat("truncated: ", have, " of ", want, " bytes"));
  if (have > want)
    return absl::DataLossError(
        absl::StrCat(have - want, " bytes after the end its header gives (", want, " bytes)"));
  // Everything but the checksum's own digits: the header up to them, then the rest.
  const std::string sum = Checksum(header.substr(0, header.size() - f[4].size()), file.substr(eol + 1));
  if (sum != f[4]) return absl::DataLossError("checksum mismatch (content damaged)");
  const absl::string_view stored_key = file.substr(eol + 1, key_bytes);
  if (file[eol + 1 + key_bytes] != '\n') return absl::DataLossError("garbled: no newline after the key");
  if (stored_key != key)
    return absl::DataLossError(absl::StrCat("stored under another key ('",
                                            absl::CEscape(stored_key.substr(0, 80)),
                                            stored_key.size() > 80 ? "...'" : "'", ")"));
  return file.substr(eol + 1 + key_bytes + 1);
}

// The body of an entry whose header, checksum and key have been checked.
absl::StatusOr<std::shared_ptr<Executable>> Decode(absl::string_view body) {
  json j = json::parse(body.begin(), body.end());  // throws on damage; the caller turns that into an error
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
      (std::string(field) == "param_shardings" ? exe->param_shardings : exe->output_shardings)
          .push_back(*sharding);
    }
  for (const auto& m : j.at("moved_values"))
    exe->moved_values.push_back({m.at(0).get<int64_t>(), m.at(1).get<int64_t>()});
  if (j.contains("layout_origins"))  // entries written before it have none: nothing is blamed through them
    for (const auto& o : j.at("layout_origins"))
      exe->output_layout_origins.push_back({o.at(0).get<int64_t>(),
                                            compiler::SourceLoc{o.at(1).get<std::string>(), o.at(2).get<int>(), ""},
                                            o.at(3).get<std::string>()});
  for (const auto& d : j.at("decisions"))
    exe->sharding.decisions.push_back({d.at(0).get<int64_t>(), d.at(1).get<std::string>(),
                                       d.at(2).get<std::string>(), d.at(3).get<std::string>(),
                                       d.at(4).get<std::string>(), d.at(5).get<std::string>(),
                                       d.at(6).get<int>(), d.at(7).get<int64_t>()});
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

absl::StatusOr<std::unique_ptr<CompileCache>> CompileCache::Open(const std::string& dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (ec || !std::filesystem::exists(status))
    return absl::InvalidArgumentError(absl::StrCat("compile cache directory '", dir, "' does not exist",
                                                   ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  if (!std::filesystem::is_directory(status))
    return absl::InvalidArgumentError(absl::StrCat("compile cache directory '", dir,
                                                   "' is not a directory; pass a directory to --cache-dir"));
  auto cache = std::unique_ptr<CompileCache>(new CompileCache(dir));
  cache->RemoveOrphanedTemporaries();
  return cache;
}

void CompileCache::RemoveOrphanedTemporaries() {
  const std::string host = HostTag();
  const std::time_t now = std::time(nullptr);
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(".sscache.tmp.");
    if (at == std::string::npos) continue;
    // <entry>.tmp.<host>.<pid>.<random> (older writers: <entry>.tmp.<pid>.<random>).
    const std::vector<std::string> f = absl::StrSplit(name.substr(at + std::strlen(".sscache.tmp.")), '.');
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    bool orphan = now - st.st_mtime > kOrphanTempAge.count();
    int pid = 0;
    if (!orphan && f.size() == 3 && f[0] == host && absl::SimpleAtoi(f[1], &pid) && pid > 0)
      orphan = kill(pid, 0) != 0 && errno == ESRCH;  // EPERM: alive, another user's
    if (orphan && unlink(it->path().c_str()) == 0) ++orphans_removed_;
  }
}

std::string CompileCache::PathOf(const std::string& key) const {
  return (std::filesystem::path(dir_) / FileName(key)).string();
}

std::string CompileCache::TempPathOf(const std::string& entry_path, int pid, uint32_t nonce) {
  return absl::StrCat(entry_path, ".tmp.", HostTag(), ".", pid, ".", nonce);
}

absl::StatusOr<std::optional<std::shared_ptr<Executable>>> CompileCache::Load(const std::string& key) {
  const std::string path = PathOf(key);
  auto unreadable = [&](absl::string_view what) {
    ++unreadable_;
    ++misses_;
    return absl::DataLossError(absl::StrCat("compile cache entry ", path, ": ", what));
  };
  // Non-blocking and not following links: a FIFO or a link at the path never hangs or redirects the read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      ++misses_;
      return std::optional<std::shared_ptr<Executable>>();
    }
    if (errno == ELOOP)
      return unreadable(
          "is a symbolic link, not a regular file; skipped (left in place, not overwritten), recompiled");
    return unreadable(absl::StrCat("cannot be opened (", std::strerror(errno), "); recompiled"));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0)
    return unreadable(absl::StrCat("cannot be examined (", std::strerror(errno), "); recompiled"));
  if (!S_ISREG(st.st_mode))
    return unreadable(
        absl::StrCat("is ", KindOf(st.st_mode),
                     ", not a regular file; skipped (left in place, not overwritten), recompiled"));
  std::string text;
  absl::Status failed;
  absl::StatusOr<std::shared_ptr<Executable>> exe;
  if (st.st_size > kMaxEntryBytes) {
    failed = absl::DataLossError(absl::StrCat("too large to be an entry (", st.st_size, " bytes)"));
  } else if (absl::Status r = ReadAll(fd, st.st_size, &text); !r.ok()) {
    failed = r;
  } else if (auto body = Unframe(text, key); !body.ok()) {
    failed = body.status();
  } else {
    try {
      exe = Decode(*body);
    } catch (const std::exception& e) {
      exe = absl::DataLossError(e.what());
    }
    if (!exe.ok())
      failed = absl::DataLossError(absl::StrCat("garbled content (", exe.status().message(), ")"));
  }
  if (failed.ok()) {
    ++hits_;
    return std::optional<std::shared_ptr<Executable>>(*exe);
  }
  // Remove the damaged entry, but only our own file, and only if it is still
  // the one we read (another process may have just renamed a good one into place).
  struct stat now;
  std::string fate;
  if (st.st_uid != geteuid())
    fate = absl::StrCat("not removed (owned by uid ", st.st_uid, ")");
  else if (lstat(path.c_str(), &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino)
    fate = "already replaced";
  else if (unlink(path.c_str()) != 0)
    fate = absl::StrCat("could not be removed (", std::strerror(errno), ")");
  else
    fate = "removed";
  return unreadable(absl::StrCat(failed.message(), "; ", fate, ", recompiled"));
}

absl::Status CompileCache::Store(const std::string& key, const Executable& exe) {
  json j;
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
  j["layout_origins"] = json::array();
  for (const auto& o : exe.output_layout_origins)
    j["layout_origins"].push_back({o.param_index, o.loc.file, o.loc.line, o.sharding});
  j["decisions"] = json::array();
  for (const auto& d : exe.sharding.decisions)
    j["decisions"].push_back(
        {d.op_id, d.name, d.sharding, d.source, d.via, d.source_file, d.source_line, d.from_op_id});
  j["rematerializations"] = json::array();
  for (const auto& m : exe.sharding.rematerializations)
    j["rematerializations"].push_back({m.op_id, m.value, m.op, m.bytes, m.source_file, m.source_line});
  const std::string body = j.dump(-1, ' ', false, json::error_handler_t::replace);  // names are the user's bytes
  const std::string path = PathOf(key);
  // Something other than a regular file at the path (a FIFO, a directory, a
  // link) is not ours to replace.
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(
        "compile cache entry ", path, " is ", KindOf(st.st_mode), ", not a regular file; not overwritten"));
  const std::string prefix =
      absl::StrCat(kEntryMagic, " ", kEntryFormatVersion, " ", key.size(), " ", body.size(), " ");
  const std::string rest = absl::StrCat(key, "\n", body);
  const std::string file = absl::StrCat(prefix, Checksum(prefix, rest), "\n", rest);
  // A unique temporary name, renamed into place: readers in other processes
  // see the old entry or the whole new one, never a part. Host and pid let a
  // later Open tell a killed writer's leftover from a live writer's file.
  std::random_device rd;
  const std::string tmp = TempPathOf(path, getpid(), rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::UnavailableError(
        absl::StrCat("cannot write the compile cache entry ", tmp, ": ", std::strerror(errno)));
  absl::Status written = WriteAll(fd, file);
  if (::close(fd) != 0 && written.ok()) written = absl::UnavailableError(std::strerror(errno));
  if (!written.ok()) {
    unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot write the compile cache entry ", tmp, ": ", written.message()));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot store the compile cache entry ", path, ": ", why));
  }
  return absl::OkStatus();
}

}  // namespace shardscope::runtime
